/**
 * The store channels on PostgreSQL (src/store/postgres/channel.ts): each message reaches the
 * listeners of its own channel only, and the channels an instance opens on one store share one
 * client, two connections in all however many there are, closed with the last of them.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { openStoreChannel } from '../../src/store/open-store.ts'
import { CHANNEL_CONNECTION_NAME } from '../../src/store/postgres/channel.ts'
import { freshSchemaUrl, TEST_DATABASE_URL } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

describe.skipIf(!TEST_DATABASE_URL)('store channels on PostgreSQL', () => {
  const { url } = freshSchemaUrl(TEST_DATABASE_URL ?? 'postgres://unused')
  const admin = postgres(TEST_DATABASE_URL ?? 'postgres://unused', { max: 1, onnotice: () => {} })
  afterAll(() => admin.end())
  // The channel connections opened since the test began (another test's have ended by then).
  const started = new Date()
  const connections = async () =>
    Number(
      (
        await admin`SELECT count(*) AS n FROM pg_stat_activity
        WHERE application_name = ${CHANNEL_CONNECTION_NAME} AND backend_start >= ${started}`
      )[0].n,
    )

  test('three channels: each hears its own messages, over two connections in all', async () => {
    const before = await connections()
    const config = { databaseUrl: url, dataDir: '' } as never
    const names = ['nudges', 'changes', 'keys']
    const channels = await Promise.all(names.map((name) => openStoreChannel(config, name)))
    const heard: Record<string, string[]> = { nudges: [], changes: [], keys: [] }
    for (const [i, channel] of channels.entries())
      await channel!.listen((payload) => heard[names[i]].push(payload))
    for (const [i, channel] of channels.entries()) await channel!.send(`to ${names[i]}`)
    await waitFor('every message', async () => names.every((name) => heard[name].length > 0))
    expect(heard).toEqual({ nudges: ['to nudges'], changes: ['to changes'], keys: ['to keys'] })
    expect((await connections()) - before).toBe(2)
    // One closed: the others still hear theirs.
    await channels[0]!.close()
    await channels[1]!.send('again')
    await waitFor('the message after a close', async () => heard.changes.length === 2)
    expect(heard.nudges).toEqual(['to nudges'])
    for (const channel of channels.slice(1)) await channel!.close()
    await waitFor('the connections to close', async () => (await connections()) <= before)
  })
})
