/**
 * An upstream replica that cannot be reached is the operator's to see (docs/operations.md): a
 * warn line `upstream.replica_down` when it is taken out, `upstream.replica_up` when a probe finds
 * it back, and /metrics' multigrid_upstream_replicas_healthy beside multigrid_upstream_replicas.
 */
import { expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { startTestGateway } from '../helpers/gateway.ts'
import { freePort } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

test('a replica that refuses connections is logged down and counted out of /metrics, and logged up when it answers again', async () => {
  const sim = await startSimulator({ latencyMs: 1 })
  const deadPort = freePort()
  const lines: string[] = []
  const gw = await startTestGateway({
    catalog: testCatalog({ openai: [`${sim.url}/v1`, `http://127.0.0.1:${deadPort}/v1`] }),
    env: { MULTIGRID_DISPATCH: '0', LOG_LEVEL: 'info' },
    logLines: lines,
  })
  let revived: Simulator | null = null
  try {
    const { key } = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
    const healthyGauge = async () => {
      const text = await (await fetch(`${gw.url}/metrics`)).text()
      expect(text).toContain('multigrid_upstream_replicas{provider="sim"} 2')
      return /multigrid_upstream_replicas_healthy\{provider="sim"\} (\d+)/.exec(text)?.[1]
    }
    expect(await healthyGauge()).toBe('2')
    // The pool sends calls to both; the refused one moves on to the live replica at once.
    for (let i = 0; i < 4; i++) {
      const answer = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/chat',
          messages: [{ role: 'user', content: `hello ${i}` }],
          max_tokens: 5,
        }),
      })
      expect(answer.status).toBe(200)
    }
    const events = () =>
      lines
        .flatMap((text) => text.split('\n'))
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>)
    const down = events().filter((e) => e.event === 'upstream.replica_down')
    expect(down).toHaveLength(1)
    expect(down[0]).toMatchObject({
      level: 'warn',
      provider: 'sim',
      replica: `http://127.0.0.1:${deadPort}/v1`,
      reason: 'no connection could be made',
      healthy_replicas: 1,
      replicas: 2,
    })
    expect(await healthyGauge()).toBe('1')
    // Something answers there now: the next probe (every 5 s) brings it back.
    revived = await startSimulator({ port: deadPort, latencyMs: 1 })
    await waitFor(
      'the replica logged back up',
      async () => events().some((e) => e.event === 'upstream.replica_up'),
      12_000,
      100,
    )
    expect(events().find((e) => e.event === 'upstream.replica_up')).toMatchObject({
      level: 'info',
      provider: 'sim',
      healthy_replicas: 2,
    })
    expect(await healthyGauge()).toBe('2')
  } finally {
    await gw.stop()
    await sim.stop()
    await revived?.stop()
  }
}, 30_000)
