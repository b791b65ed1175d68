/**
 * The chunk-intent part of the store contract (docs/batch-lanes.md; src/store/batch-chunks/chunk-store.ts),
 * run by test/store/chunks.test.ts on every dialect: an intent with its lines, leases one holder
 * at a time and taken over when they run out, changes by the holder only, cancel requests.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { ChunkIntent, ChunkStore } from '../../src/store/batch-chunks/chunk-store.ts'
import type { OpenedStore } from '../../src/store/store.ts'

const T0 = 1_764_460_000_000

const intent = (id: string, batchId = 'batch_1', lineNos = [3, 1, 7]): ChunkIntent => ({
  id,
  batchId,
  offering: 'openai:batch',
  provider: 'openai',
  upstreamModel: 'gpt-sim',
  endpoint: 'chat',
  fallbackAtMs: T0 + 3_600_000,
  lineNos,
})

export function runChunkStoreContract(name: string, makeStore: () => Promise<OpenedStore>) {
  describe(`chunk store contract: ${name}`, () => {
    let opened: OpenedStore
    let chunks: ChunkStore

    beforeEach(async () => {
      opened = await makeStore()
      chunks = opened.chunks
    })
    afterEach(async () => {
      await opened.store.close()
    })

    test('an intent is stored with its lines by position, due now, under no lease', async () => {
      await chunks.createChunk(intent('chk_a'), T0)
      const chunk = await chunks.getChunk('chk_a')
      expect(chunk).toMatchObject({
        id: 'chk_a',
        batchId: 'batch_1',
        offering: 'openai:batch',
        provider: 'openai',
        upstreamModel: 'gpt-sim',
        endpoint: 'chat',
        state: 'intent',
        fallbackAtMs: T0 + 3_600_000,
        inputFileId: null,
        providerBatchId: null,
        lineCount: 3,
        leaseOwner: null,
        nextPollAt: T0,
        pollFailures: 0,
        error: null,
      })
      expect(await chunks.chunkLines('chk_a')).toEqual([
        { position: 1, lineNo: 3, attempts: 1 },
        { position: 2, lineNo: 1, attempts: 1 },
        { position: 3, lineNo: 7, attempts: 1 },
      ])
      await chunks.createChunk({ ...intent('chk_n'), attempts: [2, 1, 5] }, T0)
      expect((await chunks.chunkLines('chk_n')).map((line) => line.attempts)).toEqual([2, 1, 5])
      expect(await chunks.getChunk('chk_missing')).toBeNull()
    })

    test('a chunk is leased to one holder at a time and taken over when the lease runs out', async () => {
      await chunks.createChunk(intent('chk_a'), T0)
      await chunks.createChunk(intent('chk_b'), T0 + 1)
      const first = await chunks.claimChunks('one', 10, T0 + 5, T0 + 60_000)
      expect(first.map((chunk) => chunk.id)).toEqual(['chk_a', 'chk_b'])
      expect(first[0].leaseOwner).toBe('one')
      expect(await chunks.claimChunks('two', 10, T0 + 10, T0 + 60_000)).toEqual([])
      // The holder died: after its lease another instance resumes from the stored ids.
      const taken = await chunks.claimChunks('two', 1, T0 + 60_000, T0 + 120_000)
      expect(taken.map((chunk) => chunk.id)).toEqual(['chk_a'])
      expect(await chunks.updateChunk('one', 'chk_a', { state: 'submitted' }, T0 + 60_001)).toBe(
        false,
      )
      expect((await chunks.getChunk('chk_a'))?.state).toBe('intent')
    })

    test("an intent written under a lease is its writer's until the lease runs out", async () => {
      await chunks.createChunk(intent('chk_a'), T0, { owner: 'writer', untilMs: T0 + 60_000 })
      expect((await chunks.getChunk('chk_a'))?.leaseOwner).toBe('writer')
      expect(await chunks.claimChunks('other', 1, T0 + 1, T0 + 60_000)).toEqual([])
      expect(await chunks.updateChunk('writer', 'chk_a', { inputFileId: 'file-1' }, T0 + 2)).toBe(
        true,
      )
      expect(
        (await chunks.claimChunks('other', 1, T0 + 60_000, T0 + 120_000))[0]?.inputFileId,
      ).toBe('file-1')
    })

    test('claims at once never hand one chunk to two holders', async () => {
      for (let i = 0; i < 6; i++)
        await chunks.createChunk(intent(`chk_${i}`, 'batch_1', [i + 1]), T0)
      const claims = await Promise.all(
        ['a', 'b', 'c'].map((owner) => chunks.claimChunks(owner, 3, T0, T0 + 60_000)),
      )
      const ids = claims.flat().map((chunk) => chunk.id)
      expect(new Set(ids).size).toBe(ids.length)
      expect(ids.length).toBe(6)
    })

    test('the holder records the provider ids, the next poll and failures; release frees it', async () => {
      await chunks.createChunk(intent('chk_a'), T0)
      await chunks.claimChunks('one', 1, T0, T0 + 60_000)
      const patch = {
        state: 'submitted' as const,
        inputFileId: 'file-1',
        providerBatchId: 'batch_x',
      }
      expect(await chunks.updateChunk('one', 'chk_a', patch, T0 + 1)).toBe(true)
      expect(
        await chunks.updateChunk(
          'one',
          'chk_a',
          { nextPollAt: T0 + 30_000, pollFailures: 2, error: 'upstream answered 500' },
          T0 + 2,
        ),
      ).toBe(true)
      let chunk = await chunks.getChunk('chk_a')
      expect(chunk).toMatchObject({
        state: 'submitted',
        inputFileId: 'file-1',
        providerBatchId: 'batch_x',
        nextPollAt: T0 + 30_000,
        pollFailures: 2,
        error: 'upstream answered 500',
        updatedAt: T0 + 2,
      })
      expect(await chunks.updateChunk('one', 'chk_a', { error: null }, T0 + 3)).toBe(true)
      expect((await chunks.getChunk('chk_a'))?.error).toBeNull()
      // Not due yet: nobody claims it, even with the lease given up.
      expect(await chunks.releaseChunk('two', 'chk_a')).toBe(false)
      expect(await chunks.releaseChunk('one', 'chk_a')).toBe(true)
      expect(await chunks.claimChunks('two', 1, T0 + 10_000, T0 + 70_000)).toEqual([])
      chunk = (await chunks.claimChunks('two', 1, T0 + 30_000, T0 + 90_000))[0]
      expect(chunk?.providerBatchId).toBe('batch_x')
    })

    test('ended and abandoned chunks are no longer followed', async () => {
      await chunks.createChunk(intent('chk_a'), T0)
      await chunks.createChunk(intent('chk_b'), T0)
      await chunks.claimChunks('one', 2, T0, T0 + 1)
      await chunks.updateChunk('one', 'chk_a', { state: 'ended' }, T0)
      await chunks.updateChunk('one', 'chk_b', { state: 'abandoned' }, T0)
      expect(await chunks.claimChunks('two', 10, T0 + 5, T0 + 60_000)).toEqual([])
      expect((await chunks.chunksOfBatch('batch_1')).map((chunk) => chunk.state)).toEqual([
        'ended',
        'abandoned',
      ])
    })

    test("cancelling a batch makes its followed chunks due now, submitted ones 'cancelling'", async () => {
      await chunks.createChunk(intent('chk_a'), T0)
      await chunks.createChunk(intent('chk_b'), T0)
      await chunks.createChunk(intent('chk_c', 'batch_2'), T0)
      await chunks.claimChunks('one', 3, T0, T0 + 1)
      await chunks.updateChunk('one', 'chk_a', { state: 'submitted', nextPollAt: T0 + 600_000 }, T0)
      await chunks.updateChunk('one', 'chk_b', { state: 'ended' }, T0)
      expect(await chunks.requestCancel('batch_1', T0 + 100)).toBe(1)
      const chunk = await chunks.getChunk('chk_a')
      expect(chunk).toMatchObject({ state: 'cancelling', nextPollAt: T0 + 100 })
      expect((await chunks.getChunk('chk_c'))?.state).toBe('intent')
    })

    test('open chunks are summed per batch and offering, with the earliest fallback', async () => {
      await chunks.createChunk(intent('chk_a'), T0)
      await chunks.createChunk({ ...intent('chk_b'), fallbackAtMs: T0 + 60_000, lineNos: [2] }, T0)
      await chunks.createChunk(intent('chk_c'), T0)
      await chunks.createChunk(intent('chk_d', 'batch_2'), T0)
      await chunks.createChunk(intent('chk_e', 'batch_3'), T0)
      await chunks.claimChunks('one', 5, T0, T0 + 1)
      await chunks.updateChunk('one', 'chk_c', { state: 'ended' }, T0)
      const open = await chunks.openChunks(['batch_1', 'batch_2', 'batch_none'])
      expect(open.sort((a, b) => a.batchId.localeCompare(b.batchId))).toEqual([
        {
          batchId: 'batch_1',
          offering: 'openai:batch',
          chunks: 2,
          lines: 4,
          fallbackAtMs: T0 + 60_000,
        },
        {
          batchId: 'batch_2',
          offering: 'openai:batch',
          chunks: 1,
          lines: 3,
          fallbackAtMs: T0 + 3_600_000,
        },
      ])
      expect(await chunks.openChunks([])).toEqual([])
    })

    test('a provider batch id tells which chunk follows it, per provider', async () => {
      await chunks.createChunk(intent('chk_a'), T0)
      await chunks.claimChunks('one', 1, T0, T0 + 1)
      await chunks.updateChunk('one', 'chk_a', { state: 'submitted', providerBatchId: 'pb_1' }, T0)
      expect(await chunks.chunkOfProviderBatch('openai', 'pb_1')).toBe('chk_a')
      expect(await chunks.chunkOfProviderBatch('anthropic', 'pb_1')).toBeNull()
      expect(await chunks.chunkOfProviderBatch('openai', 'pb_2')).toBeNull()
    })

    test('a chunk of many lines is stored whole', async () => {
      const lineNos = Array.from({ length: 25_000 }, (_, i) => 2 * i + 1)
      await chunks.createChunk(intent('chk_big', 'batch_1', lineNos), T0)
      const lines = await chunks.chunkLines('chk_big')
      expect(lines).toHaveLength(25_000)
      expect(lines.at(-1)).toEqual({ position: 25_000, lineNo: 49_999, attempts: 1 })
    })
  })
}
