/**
 * Anthropic's structured outputs (`output_config.format`, what the SDK's `messages.parse` sends)
 * through /anthropic with the unchanged SDK (docs/clients/anthropic-sdk.md): translated for a
 * chat-only model into chat's response_format, passed through to Claude, live and in a Message
 * Batch, where an answer that is not the JSON asked for is errored and not billed.
 */
import Anthropic from '@anthropic-ai/sdk'
import { jsonSchemaOutputFormat } from '@anthropic-ai/sdk/helpers/json-schema'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { STORES, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { messageBatchEnded } from '../helpers/message-batches.ts'

const SCHEMA = {
  type: 'object',
  properties: { label: { type: 'string', enum: ['bug', 'question'] } },
  required: ['label'],
  additionalProperties: false,
} as const

for (const store of STORES) describe(store, () => suite(store))

function suite(store: (typeof STORES)[number]) {
  let sim: Simulator
  let gw: TestGateway
  let client: Anthropic
  let key: string

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 1, keepBodies: 200 })
    gw = await startTestGateway({
      store,
      upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
      env: { MULTIGRID_POLL_MS: '50' },
    })
    key = (await gw.newAccount('10')).key
    client = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: key, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw.stop()
    await sim.stop()
  })

  const asked = (model: string, content: string) => ({
    model,
    max_tokens: 64,
    messages: [{ role: 'user' as const, content }],
    output_config: { format: jsonSchemaOutputFormat(SCHEMA) },
  })

  test('messages.parse to a chat-only model sends chat a json_schema response_format and parses the answer', async () => {
    const message = await client.messages.parse(asked('sim/chat', 'Triage: the app crashes.'))
    expect(['bug', 'question']).toContain((message.parsed_output as { label: string }).label)
    const sent = JSON.parse(sim.received().at(-1)!.text) as Record<string, unknown>
    expect(sim.received().at(-1)!.path).toBe('/v1/chat/completions')
    expect(sent.response_format).toEqual({
      type: 'json_schema',
      // The schema as the SDK sends it (its helper rewrites it, an enum's type left out).
      json_schema: { name: 'output', schema: jsonSchemaOutputFormat(SCHEMA).schema },
    })
    expect(sent).not.toHaveProperty('output_config')
  })

  test('streamed, the final message of a chat-only model is parsed too', async () => {
    const stream = client.messages.stream(asked('sim/chat', 'Triage: how do I log in?'))
    const message = await stream.finalMessage()
    expect(['bug', 'question']).toContain((message.parsed_output as { label: string }).label)
  })

  test('a format that is not a JSON schema, or a field beside it chat has no place for, is a 400 naming it', async () => {
    const refused = async (outputConfig: unknown) => {
      const error = await client.messages
        .create({ ...asked('sim/chat', 'x'), output_config: outputConfig } as never)
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      return (error as { error: { error: { param: string; message: string } } }).error.error
    }
    expect((await refused({ format: { type: 'json_object' } })).param).toBe(
      'output_config.format.type',
    )
    expect((await refused({ format: { type: 'json_schema' } })).param).toBe(
      'output_config.format.schema',
    )
    const effort = await refused({
      effort: 'high',
      format: { type: 'json_schema', schema: SCHEMA },
    })
    expect(effort.param).toBe('output_config.effort')
    expect(effort.message).toContain('remove it')
  })

  test('in a Message Batch, an answer that is not the JSON asked for is errored and unbilled, translated or passed through', async () => {
    const requests = [
      { custom_id: 'chat-valid', params: asked('sim/chat', 'Triage: crash') },
      { custom_id: 'chat-prose', params: asked('sim/chat', '[sim:not_json] Triage: crash') },
      { custom_id: 'claude-valid', params: asked('sim/claude', 'Triage: crash') },
      { custom_id: 'claude-prose', params: asked('sim/claude', '[sim:not_json] Triage: crash') },
    ]
    const created = await client.messages.batches.create({ requests })
    const ended = await messageBatchEnded(client, created.id)
    expect(ended.request_counts).toMatchObject({ succeeded: 2, errored: 2 })
    const results = new Map<string, Anthropic.Messages.MessageBatchResult>()
    for await (const entry of await client.messages.batches.results(created.id))
      results.set(entry.custom_id, entry.result)
    for (const id of ['chat-valid', 'claude-valid']) {
      const result = results.get(id)!
      expect(result.type).toBe('succeeded')
      const text = (result as Anthropic.Messages.MessageBatchSucceededResult).message.content[0]
      expect(JSON.parse((text as { text: string }).text)).toHaveProperty('label')
    }
    for (const id of ['chat-prose', 'claude-prose']) {
      const result = results.get(id) as Anthropic.Messages.MessageBatchErroredResult
      expect(result.type).toBe('errored')
      expect(result.error.error.type).toBe('invalid_request_error')
      expect(result.error.error.message).toContain('not JSON')
    }
    const nativeId = `batch_${created.id.slice('msgbatch_'.length)}`
    const lines = await (await gw.request(`/v1/batches/${nativeId}/results`, key)).text()
    const costs = lines
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { custom_id: string; cost_usd: string; error: unknown })
    for (const line of costs)
      if (line.custom_id.endsWith('prose')) {
        expect(line.cost_usd).toBe('0')
        expect(line.error).toMatchObject({ code: 'structured_output_invalid' })
      }
  })
}
