/**
 * The ceiling stays a true bound for what the gateway cannot size (docs/money-and-limits.md):
 * content the provider fetches or reads itself — an Anthropic document by URL or file id, a
 * Responses input_file — is held at the model's whole context window of input; a tool the
 * provider runs and bills per call (web search) is refused, naming what to send instead. A
 * plain request's ceiling is what it was.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { responsesCatalog, responsesModel } from '../helpers/catalog.ts'
import { startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'

const PDF_URL = 'https://example.com/report.pdf'

for (const store of STORES) {
  describe(`content the provider reads itself (${store})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let key: string
    let poorKey: string
    let brokeKey: string

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 1 })
      const catalog = responsesCatalog(sim.url)
      catalog.models.push(responsesModel())
      gw = await startTestGateway({ store, catalog })
      key = (await gw.newAccount('10')).key
      // Enough for any plain call here, far from a whole context window.
      poorKey = (await gw.newAccount('0.02')).key
      brokeKey = (await gw.newAccount('0.000001')).key
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const dryRun = async (url: string, body: Record<string, unknown>) => {
      const line = { custom_id: 'r', method: 'POST', url, body }
      const answer = await gw.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        body: JSON.stringify(line),
      })
      return { status: answer.status, json: (await answer.json()) as Record<string, any> }
    }
    const ceilingOf = async (url: string, body: Record<string, unknown>) => {
      const { status, json } = await dryRun(url, body)
      expect(status).toBe(200)
      return new Decimal(json.cost_ceiling_usd as string)
    }
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${poorKey}`,
          'content-type': 'application/json',
          ...headers,
        },
        body: JSON.stringify(body),
      })

    const message = (content: unknown, extra: Record<string, unknown> = {}) => ({
      model: 'sim/claude',
      max_tokens: 16,
      messages: [{ role: 'user', content }],
      ...extra,
    })
    const withDocument = (source: unknown) =>
      message([
        { type: 'document', source },
        { type: 'text', text: 'Summarize it.' },
      ])

    // sim/claude: 200,000 tokens of context at $3 per million input, $15 per million output.
    const CLAUDE_WINDOW = new Decimal(200_000).times(3).div(1e6)

    // A Message Batch has no dry run: its ceiling is the one its 402 names to an account with
    // next to no credit.
    const batchCeiling = async (params: Record<string, unknown>) => {
      const answer = await post(
        '/anthropic/v1/messages/batches',
        { requests: [{ custom_id: 'r', params }] },
        { authorization: `Bearer ${brokeKey}` },
      )
      expect(answer.status).toBe(402)
      return new Decimal(((await answer.json()) as any).error.cost_ceiling_usd as string)
    }

    test('a Message Batch request with a document by URL or file id is held at the whole context window', async () => {
      const plain = await batchCeiling(message('Summarize it.'))
      // The plain ceiling as it was before documents were bounded (measured then).
      expect(plain.toFixed()).toBe('0.00054')
      for (const source of [
        { type: 'url', url: PDF_URL },
        { type: 'file', file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' },
        { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQK' },
      ]) {
        const ceiling = await batchCeiling(withDocument(source))
        expect(ceiling.greaterThanOrEqualTo(CLAUDE_WINDOW)).toBe(true)
      }
      // A text document is its text: sized as it was.
      const text = await batchCeiling(
        withDocument({ type: 'text', media_type: 'text/plain', data: 'A short note.' }),
      )
      expect(text.lessThan('0.01')).toBe(true)
    })

    test('a live Messages call and a Message Batch with a URL document are held for the window: a 402 past the credit', async () => {
      const plain = await post('/anthropic/v1/messages', message('Say hi.'))
      expect(plain.status).toBe(200)
      const live = await post('/anthropic/v1/messages', withDocument({ type: 'url', url: PDF_URL }))
      expect(live.status).toBe(402)
      const refused = (await live.json()) as { type: string; error: Record<string, string> }
      expect(refused.type).toBe('error')
      expect(new Decimal(refused.error.cost_ceiling_usd!).gte(CLAUDE_WINDOW)).toBe(true)
      const batch = await post('/anthropic/v1/messages/batches', {
        requests: [{ custom_id: 'r', params: withDocument({ type: 'url', url: PDF_URL }) }],
      })
      expect(batch.status).toBe(402)
      const held = (await batch.json()) as { error: Record<string, string> }
      expect(new Decimal(held.error.cost_ceiling_usd!).gte(CLAUDE_WINDOW)).toBe(true)
    })

    // sim/responses: 32,000 tokens of context at $1 per million input.
    const RESPONSES_WINDOW = new Decimal(32_000).div(1e6)
    const response = (content: unknown, extra: Record<string, unknown> = {}) => ({
      model: 'sim/responses',
      input: [{ role: 'user', content }],
      max_output_tokens: 16,
      ...extra,
    })
    const withFile = (file: Record<string, unknown>) =>
      response([
        { type: 'input_file', ...file },
        { type: 'input_text', text: 'Summarize it.' },
      ])

    test('a Responses line with an input_file by URL or id is held at the whole context window', async () => {
      const plain = await ceilingOf('/v1/responses', response('Summarize it.'))
      expect(plain.toFixed()).toBe('0.000141')
      for (const file of [{ file_url: PDF_URL }, { file_id: 'file-abc' }]) {
        const ceiling = await ceilingOf('/v1/responses', withFile(file))
        expect(ceiling.greaterThanOrEqualTo(RESPONSES_WINDOW)).toBe(true)
      }
    })

    test('a live Responses call with an input_file by URL is held for the window: a 402 past the credit', async () => {
      const plain = await post('/v1/responses', response('Say hi.'))
      expect(plain.status).toBe(200)
      const live = await post('/v1/responses', withFile({ file_url: PDF_URL }))
      expect(live.status).toBe(402)
      const refused = (await live.json()) as { error: Record<string, string> }
      expect(new Decimal(refused.error.cost_ceiling_usd!).gte(RESPONSES_WINDOW)).toBe(true)
    })

    test('web_search on /v1/responses is a 400 naming the tool and what to send instead', async () => {
      const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object' } }]
      const withSearch = response('Search the news.', { tools: [...tools, { type: 'web_search' }] })
      const live = await post('/v1/responses', withSearch)
      expect(live.status).toBe(400)
      const { error } = (await live.json()) as { error: { message: string; param: string } }
      expect(error.param).toBe('tools[1].type')
      expect(error.message).toContain('"web_search"')
      expect(error.message).toContain('no price')
      expect(error.message).toContain('send a function tool')
      const line = await dryRun('/v1/responses', withSearch)
      expect(line.status).toBe(400)
      expect(line.json.issues[0].path).toBe('body.tools[1].type')
      expect(line.json.issues[0].message).toContain('"web_search"')
    })

    test('a web_search server tool on /anthropic/v1/messages is a 400 naming it and what to send instead', async () => {
      const withSearch = message('Search the news.', {
        tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }],
      })
      const live = await post('/anthropic/v1/messages', withSearch)
      expect(live.status).toBe(400)
      const refused = (await live.json()) as { type: string; error: Record<string, string> }
      expect(refused.error.type).toBe('invalid_request_error')
      expect(refused.error.message).toContain('tools[0].type')
      expect(refused.error.message).toContain('"web_search_20250305"')
      expect(refused.error.message).toContain('no price')
      expect(refused.error.message).toContain('send a function tool')
      const batch = await post('/anthropic/v1/messages/batches', {
        requests: [{ custom_id: 'r', params: withSearch }],
      })
      expect(batch.status).toBe(400)
      const { issues } = (await batch.json()) as { issues: { path: string; message: string }[] }
      expect(issues[0].path).toBe('requests[0].params.tools[0].type')
      expect(issues[0].message).toContain('no price')
    })
  })
}
