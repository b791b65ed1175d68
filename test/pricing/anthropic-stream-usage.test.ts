/**
 * A streamed Anthropic answer's usage (docs/pricing.md), over real HTTP: message_delta's figures are
 * cumulative and Anthropic types every one but output_tokens as nullable, so a null there means
 * "not reported here", not zero. Billed from message_start's prompt classes and message_delta's
 * output, whether the stream is passed through (/anthropic/v1/messages) or translated to chat.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

const START = { input_tokens: 3, cache_read_input_tokens: 20, cache_creation_input_tokens: 0 }
const DELTA = {
  input_tokens: null,
  cache_read_input_tokens: null,
  cache_creation_input_tokens: null,
  output_tokens: 40,
}
/** 3 × 3 + 20 × 0.30 + 40 × 15 per million. */
const COST = '0.000615'

const event = (type: string, data: object) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
const STREAM = [
  event('message_start', {
    message: {
      ...{ id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-up', content: [] },
      ...{ stop_reason: null, usage: { ...START, output_tokens: 1 } },
    },
  }),
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'hello' } }),
  event('content_block_stop', { index: 0 }),
  event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: DELTA }),
  event('message_stop', {}),
].join('')

let upstream: ReturnType<typeof Bun.serve>
let gw: TestGateway
beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: () => new Response(STREAM, { headers: { 'content-type': 'text/event-stream' } }),
  })
  const offering = {
    provider: 'up',
    upstream_model: 'claude-up',
    input_usd_per_mtok: '3',
    output_usd_per_mtok: '15',
    cached_input_usd_per_mtok: '0.30',
  }
  gw = await startTestGateway({
    catalog: {
      providers: {
        up: {
          kind: 'anthropic',
          base_url: `http://127.0.0.1:${upstream.port}`,
          api_key_env: 'MG_TEST_ANTHROPIC_KEY',
          max_concurrency: 4,
          timeout_s: 10,
        },
      },
      models: [
        {
          id: 'up/claude',
          endpoints: ['chat'],
          context_tokens: 200000,
          max_output_tokens: 1024,
          offerings: [offering],
        },
      ],
    },
  })
})
afterAll(async () => {
  await gw?.stop()
  upstream?.stop(true)
})

const messages = [{ role: 'user', content: 'a prompt long enough to bound the reported tokens' }]
const CALLS = [
  ['/anthropic/v1/messages', { model: 'up/claude', max_tokens: 50, stream: true, messages }],
  [
    '/v1/chat/completions',
    {
      model: 'up/claude',
      max_tokens: 50,
      stream: true,
      stream_options: { include_usage: true },
      messages,
    },
  ],
] as const

for (const [path, body] of CALLS)
  test(`${path}, streamed: null figures in message_delta keep message_start's, the output is the delta's`, async () => {
    const { key, accountId } = await gw.newAccount('1')
    const answer = await gw.request(path, key, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    expect(answer.status).toBe(200)
    await answer.text()
    const charged = await waitFor("the call's charge", async () => {
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        balance_usd: string
      }
      const spent = new Decimal(1).minus(account.balance_usd)
      return spent.isZero() ? null : spent
    })
    expect(charged.toFixed()).toBe(COST)
  })
