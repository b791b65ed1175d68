/**
 * A chat field that the translation to Anthropic's API does not carry over is refused for a body
 * that may go there, never dropped on the way; live over HTTP and in a batch line alike.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let sim: Simulator
let gw: TestGateway
let key: string
beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1, keepBodies: 10 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
    env: { MULTIGRID_DISPATCH: '0' },
  })
  key = (await gw.newAccount('10', { rate_limit_per_minute: 100_000 })).key
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

const live = (body: Record<string, unknown>) =>
  gw.request('/v1/chat/completions', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, ...body }),
  })

test('a live call to a model served by Anthropic with a field the translation drops is a 400 naming it', async () => {
  for (const [field, value] of [
    ['top_k', 5],
    ['verbosity', 'low'],
    ['reasoning_effort', 'low'],
  ] as const) {
    const refused = await live({ model: 'sim/claude', [field]: value })
    expect([field, refused.status]).toEqual([field, 400])
    const { error } = (await refused.json()) as { error: { param: string; message: string } }
    expect(error.param).toBe(field)
    expect(error.message).toContain('it would be dropped')
    expect(error.message).toContain(`remove ${field}`)
  }
})

test('the fields it carries over are taken, and null counts as absent', async () => {
  const dry = await gw.request('/v1/batches?dry_run=true', key, {
    method: 'POST',
    body: jsonl([
      chatLine('a', 'hi', {
        model: 'sim/claude',
        temperature: 0.5,
        top_p: 0.9,
        stop: ['x'],
        user: 'u-1',
        parallel_tool_calls: true,
        verbosity: null,
        // What clients send at a default, or for OpenAI's own storage and caching: no answer changes.
        service_tier: 'default',
        store: false,
        metadata: {},
        prompt_cache_key: 'k',
      }),
    ]),
  })
  expect(dry.status).toBe(200)
})

test("a parameter at OpenAI's default is taken where the model does not take it, live and in a batch", async () => {
  // What older clients send unasked: none of it changes an answer, so neither the catalog's
  // unsupported_params (sim/strict refuses temperature and logprobs) nor the translation refuses it.
  const defaults = {
    frequency_penalty: 0,
    presence_penalty: 0,
    n: 1,
    top_p: 1,
    logprobs: false,
    logit_bias: {},
  }
  const claude = await live({ model: 'sim/claude', ...defaults })
  expect(claude.status).toBe(200)
  // Anthropic's API has none of them: the translation leaves them out.
  const sent = JSON.parse(sim.received().at(-1)!.text) as Record<string, unknown>
  expect(Object.keys(sent)).not.toContain('frequency_penalty')
  expect(Object.keys(sent)).not.toContain('logprobs')
  const strict = await live({ model: 'sim/strict', temperature: 1, logprobs: false })
  expect(strict.status).toBe(200)
  const dry = await gw.request('/v1/batches?dry_run=true', key, {
    method: 'POST',
    body: jsonl([
      chatLine('claude', 'hi', { model: 'sim/claude', ...defaults }),
      chatLine('strict', 'hi', { model: 'sim/strict', temperature: 1, logprobs: false }),
    ]),
  })
  expect(dry.status).toBe(200)
  // A value past the default is still refused, by each check in its own words.
  const refused = await gw.request('/v1/batches?dry_run=true', key, {
    method: 'POST',
    body: jsonl([
      chatLine('claude', 'hi', { model: 'sim/claude', frequency_penalty: 0.5 }),
      chatLine('strict', 'hi', { model: 'sim/strict', logprobs: true }),
    ]),
  })
  expect(refused.status).toBe(400)
  const { issues } = (await refused.json()) as {
    issues: { line: number; path: string; message: string }[]
  }
  expect(issues.map((i) => [i.line, i.path])).toEqual([
    [1, 'body.frequency_penalty'],
    [2, 'body.logprobs'],
  ])
  expect(issues[1]!.message).toBe('is not supported by sim/strict')
})

test('in a batch line it is a line-numbered issue; a model with an OpenAI offering too is told how to route away', async () => {
  const answer = await gw.request('/v1/batches', key, {
    method: 'POST',
    body: jsonl([
      chatLine('fine', 'hi', { model: 'sim/chat', top_k: 5 }),
      chatLine('claude', 'hi', { model: 'sim/claude', top_k: 5 }),
      chatLine('multi', 'hi', { model: 'sim/multi', top_k: 5 }),
    ]),
  })
  expect(answer.status).toBe(400)
  const { issues } = (await answer.json()) as {
    issues: { line: number; path: string; message: string; fix: string }[]
  }
  // sim/chat is served by an OpenAI-compatible provider only: the field goes through as sent.
  expect(issues.map((i) => [i.line, i.path])).toEqual([
    [2, 'body.top_k'],
    [3, 'body.top_k'],
  ])
  expect(issues[0]!.fix).toBe('remove top_k')
  expect(issues[1]!.fix).toContain('"provider": {"ignore": ["sim-anthropic"]}')
})
