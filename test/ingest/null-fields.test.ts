/**
 * OpenAI's optional parameters are nullable, and null means not set (Python's `max_tokens=None`
 * sends it): a body with them is taken as if they were absent, on every model; a null model or
 * messages is still refused as missing.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let gw: TestGateway
let key: string
beforeAll(async () => {
  gw = await startTestGateway({ env: { MULTIGRID_DISPATCH: '0' } })
  key = (await gw.newAccount('10')).key
})
afterAll(() => gw.stop())

const quote = async (lines: unknown[]) => {
  const answer = await gw.request('/v1/batches?dry_run=true', key, {
    method: 'POST',
    body: jsonl(lines),
  })
  return { status: answer.status, body: (await answer.json()) as Record<string, any> }
}

const NULLS = {
  max_tokens: null,
  temperature: null,
  top_p: null,
  stop: null,
  user: null,
  tools: null,
  tool_choice: null,
  response_format: null,
  stream_options: null,
}

test('null optional fields are taken as absent, priced as the same line without them', async () => {
  for (const model of ['sim/chat', 'sim/claude']) {
    const plain = chatLine('a', 'hello there', { model })
    delete (plain.body as Record<string, unknown>).max_tokens
    const withNulls = { ...plain, body: { ...(plain.body as object), ...NULLS } }
    const [bare, nulled] = [await quote([plain]), await quote([withNulls])]
    expect([model, nulled.status]).toEqual([model, 200])
    expect(nulled.body.cost_ceiling_usd).toBe(bare.body.cost_ceiling_usd)
  }
})

test('a null model or messages is still refused, naming the field', async () => {
  const line = chatLine('a', 'hello')
  const refused = await quote([
    { ...line, body: { ...(line.body as object), model: null } },
    { ...line, custom_id: 'b', body: { ...(line.body as object), messages: null } },
  ])
  expect(refused.status).toBe(400)
  expect(refused.body.issues.map((i: { path: string }) => i.path)).toEqual([
    'body.model',
    'body.messages',
  ])
})
