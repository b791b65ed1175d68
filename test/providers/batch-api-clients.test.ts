import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import {
  anthropicBatchInput,
  createAnthropicBatchClient,
  createOpenAIBatchClient,
  mapAnthropicBatchResults,
  mapOpenAIBatchOutput,
  openAIBatchInput,
  type ChunkRequest,
} from '../../providers/batch-api/index.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'

let sim: Simulator
const key = 'sk-test-batch-key'

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, requireApiKey: key })
})
afterAll(async () => {
  await sim.stop()
})
beforeEach(() => {
  sim.configure({
    batchTurnaroundMs: 0,
    batchErrorRate: 0,
    batchExpireMs: null,
    batchFailCode: null,
  })
})

const chunk = (chunkId: string, texts: string[]): ChunkRequest => ({
  chunkId,
  endpoint: 'chat',
  model: 'gpt-sim',
  lines: texts.map((text, index) => ({
    position: index + 1,
    body: {
      model: 'the-users-alias',
      max_tokens: 32,
      messages: [{ role: 'user', content: text }],
    },
  })),
})

const openai = () =>
  createOpenAIBatchClient({
    name: 'openai',
    baseUrl: `${sim.url}/v1`,
    apiKey: key,
    timeoutMs: 5000,
  })
const anthropic = () =>
  createAnthropicBatchClient({ name: 'anthropic', baseUrl: sim.url, apiKey: key, timeoutMs: 5000 })

describe('OpenAI batch client', () => {
  test('uploads, creates with mg_chunk, reads the output back by position with usage', async () => {
    const client = openai()
    const request = chunk('chunk-a', ['first line', 'second line', 'third [sim:batch-invalid]'])
    const input = openAIBatchInput(request)
    expect(
      input
        .split('\n')
        .filter(Boolean)
        .map((row) => JSON.parse(row).custom_id),
    ).toEqual(['mg-1', 'mg-2', 'mg-3'])
    const file = await client.upload(request.chunkId, input)
    expect(file.ok).toBe(true)
    if (!file.ok) return
    const created = await client.create(request, file.value)
    expect(created.ok && created.value.chunkId).toBe('chunk-a')
    if (!created.ok) return
    const read = await client.getBatch(created.value.id)
    expect(read.ok && read.value.status).toEqual({ unified: 'ended', raw: 'completed' })
    if (!read.ok) return
    const job = sim.batches().jobs.find((item) => item.id === created.value.id)
    expect(job?.customIds).toEqual(['mg-1', 'mg-2', 'mg-3'])
    const output = await client.readFile(read.value.outputFileId as string)
    const errors = await client.readFile(read.value.errorFileId as string)
    if (!output.ok || !errors.ok) throw new Error('files unread')
    const results = [
      ...mapOpenAIBatchOutput(output.value, key),
      ...mapOpenAIBatchOutput(errors.value, key),
    ]
    results.sort((a, b) => a.position - b.position)
    expect(results.map((result) => result.type)).toEqual(['succeeded', 'succeeded', 'errored'])
    const first = results[0]
    if (first.type !== 'succeeded') throw new Error('not a success')
    expect(first.body.model).toBe('gpt-sim')
    expect(first.usage?.input_tokens).toBeGreaterThan(0)
    const third = results[2]
    expect(third.type === 'errored' && third.error.kind).toBe('invalid_request')
    expect(third.type === 'errored' && third.error.retryable).toBe(false)
    await client.close()
  })

  test('a create cut off by a crash is found by listing for its mg_chunk', async () => {
    const client = openai()
    sim.configure({ batchTurnaroundMs: 60_000 })
    const request = chunk('chunk-lost', ['lost'])
    const file = await client.upload(request.chunkId, openAIBatchInput(request))
    if (!file.ok) throw new Error('upload failed')
    const created = await client.create(request, file.value)
    if (!created.ok) throw new Error('create failed')
    for (let i = 0; i < 3; i++) {
      const other = await client.upload('other', openAIBatchInput(chunk(`other-${i}`, ['x'])))
      if (other.ok) await client.create(chunk(`other-${i}`, ['x']), other.value)
    }
    let after: string | null = null
    let found = null
    for (let page = 0; page < 10 && found === null; page++) {
      const listed = await client.list(after, 2)
      if (!listed.ok) throw new Error('list failed')
      found = listed.value.batches.find((batch) => batch.chunkId === 'chunk-lost') ?? null
      if (!listed.value.hasMore) break
      after = listed.value.lastId
    }
    expect(found?.id).toBe(created.value.id)
    const cancelled = await client.cancelBatch(created.value.id)
    expect(cancelled.ok && cancelled.value.status.unified).toBe('ended')
    const read = await client.getBatch(created.value.id)
    if (!read.ok) throw new Error('read failed')
    const errors = await client.readFile(read.value.errorFileId as string)
    if (!errors.ok) throw new Error('errors unread')
    expect(mapOpenAIBatchOutput(errors.value, key)).toEqual([{ position: 1, type: 'canceled' }])
    await client.close()
  })

  test('failures are values: a failed batch, a server-errored line, a wrong key, a lost upstream', async () => {
    const client = openai()
    sim.configure({ batchFailCode: 'token_limit_exceeded' })
    const request = chunk('chunk-f', ['x'])
    const file = await client.upload(request.chunkId, openAIBatchInput(request))
    if (!file.ok) throw new Error('upload failed')
    const created = await client.create(request, file.value)
    expect(created.ok && created.value.status.unified).toBe('failed')
    expect(created.ok && created.value.failureCode).toBe('token_limit_exceeded')
    sim.configure({ batchFailCode: null, batchErrorRate: 1 })
    const again = await client.create(request, file.value)
    if (!again.ok) throw new Error('create failed')
    const read = await client.getBatch(again.value.id)
    if (!read.ok) throw new Error('read failed')
    const errors = await client.readFile(read.value.errorFileId as string)
    if (!errors.ok) throw new Error('errors unread')
    const [line] = mapOpenAIBatchOutput(errors.value, key)
    expect(line.type === 'errored' && line.error.kind).toBe('server_error')
    expect(line.type === 'errored' && line.error.retryable).toBe(true)
    const wrong = createOpenAIBatchClient({
      name: 'o',
      baseUrl: `${sim.url}/v1`,
      apiKey: 'nope',
      timeoutMs: 5000,
    })
    const denied = await wrong.getBatch(again.value.id)
    expect(!denied.ok && denied.error.kind).toBe('auth')
    await wrong.close()
    const gone = createOpenAIBatchClient({
      name: 'o',
      baseUrl: 'http://127.0.0.1:9/v1',
      apiKey: key,
      timeoutMs: 2000,
    })
    const lost = await gone.getBatch('batch_x')
    expect(!lost.ok && lost.error.retryable).toBe(true)
    await gone.close()
    await client.close()
  })
})

describe('Anthropic batch client', () => {
  test('creates, reads results back by position, classifies errored lines', async () => {
    const client = anthropic()
    sim.configure({ batchTurnaroundMs: 0 })
    const request = {
      ...chunk('chunk-b', ['hello', 'bad [sim:batch-invalid]']),
      model: 'claude-sim',
    }
    const input = anthropicBatchInput(request, 'anthropic')
    expect(input.refused).toEqual([])
    expect(JSON.parse(input.body).requests.map((r: { custom_id: string }) => r.custom_id)).toEqual([
      'mg-1',
      'mg-2',
    ])
    const created = await client.create(input)
    if (!created.ok) throw new Error(created.error.message)
    const read = await client.getBatch(created.value.id)
    expect(read.ok && read.value.status).toEqual({ unified: 'ended', raw: 'ended' })
    const results = await client.readResults(created.value.id)
    if (!results.ok) throw new Error('results unread')
    const mapped = mapAnthropicBatchResults(results.value, key, 0).sort(
      (a, b) => a.position - b.position,
    )
    expect(mapped[0].type).toBe('succeeded')
    if (mapped[0].type === 'succeeded') {
      expect(mapped[0].body.object).toBe('chat.completion')
      expect(mapped[0].usage?.input_tokens).toBeGreaterThan(0)
    }
    expect(mapped[1].type === 'errored' && mapped[1].error.kind).toBe('invalid_request')
    await client.close()
  })

  test('cancel and expiry come back as canceled and expired; an embeddings line is refused', async () => {
    const client = anthropic()
    sim.configure({ batchTurnaroundMs: 60_000 })
    const request = { ...chunk('chunk-c', ['a', 'b']), model: 'claude-sim' }
    const created = await client.create(anthropicBatchInput(request, 'anthropic'))
    if (!created.ok) throw new Error('create failed')
    const early = await client.readResults(created.value.id)
    expect(!early.ok && early.error.kind).toBe('invalid_request')
    const cancelled = await client.cancelBatch(created.value.id)
    expect(cancelled.ok && cancelled.value.status.unified).toBe('ended')
    const results = await client.readResults(created.value.id)
    if (!results.ok) throw new Error('results unread')
    expect(mapAnthropicBatchResults(results.value, key, 0).map((r) => r.type)).toEqual([
      'canceled',
      'canceled',
    ])
    sim.configure({ batchExpireMs: 0 })
    const expiring = await client.create(anthropicBatchInput(request, 'anthropic'))
    if (!expiring.ok) throw new Error('create failed')
    const expired = await client.readResults(expiring.value.id)
    if (!expired.ok) throw new Error('results unread')
    expect(mapAnthropicBatchResults(expired.value, key, 0).map((r) => r.type)).toEqual([
      'expired',
      'expired',
    ])
    const embeddings = anthropicBatchInput({ ...request, endpoint: 'embeddings' }, 'anthropic')
    expect(embeddings.refused.map((r) => r.type)).toEqual(['errored', 'errored'])
    await client.close()
  })
})
