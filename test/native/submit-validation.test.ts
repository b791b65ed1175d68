/** POST /v1/batches: every validation rule answered with its exact line-numbered issue. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  chatLine,
  embedLine,
  jsonl,
  startTestGateway,
  STORES,
  type TestGateway,
} from '../helpers/gateway.ts'

interface IssueBody {
  error: { code: string; message: string; type: string }
  issues: { line: number; custom_id: string | null; path: string; message: string; fix: string }[]
  issues_omitted: number
}

for (const storeKind of STORES) {
  describe(`submit validation (${storeKind})`, () => {
    let gw: TestGateway
    let key: string
    let accountId: string

    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
      ;({ key, accountId } = await gw.newAccount('100'))
    })
    afterAll(() => gw.stop())

    const submit = (body: BodyInit, query = '', headers: Record<string, string> = {}) =>
      gw.request(`/v1/batches${query}`, key, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/jsonl', ...headers },
      })

    async function rejected(body: BodyInit) {
      const response = await submit(body)
      expect(response.status).toBe(400)
      const json = (await response.json()) as IssueBody
      expect(json.error.code).toBe('invalid_batch_file')
      expect(json.error.type).toBe('invalid_request_error')
      for (const issue of json.issues) expect(issue.fix.length).toBeGreaterThan(5)
      return json
    }

    async function nothingStored() {
      const list = (await (await gw.request('/v1/batches', key)).json()) as { data: unknown[] }
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        held_usd: string
      }
      return list.data.length === 0 && account.held_usd === '0.000000'
    }

    test('a JSON array, a pretty-printed file and requests run together on one line are named as such, with how to send JSONL', async () => {
      const requests = [chatLine('a'), chatLine('b')]
      const cases = [
        [JSON.stringify(requests, null, 2), 'starts a JSON array', "jq -c '.[]'"],
        [JSON.stringify(requests), 'must be a JSON object; got an array', "jq -c '.[]'"],
        [
          requests.map((r) => JSON.stringify(r, null, 2)).join('\n'),
          'starts a JSON object spread over several lines',
          'jq -c .',
        ],
        [
          requests.map((r) => JSON.stringify(r)).join(''),
          'holds more than one JSON object',
          '--data-binary',
        ],
      ] as const
      for (const [body, message, fix] of cases) {
        const json = await rejected(body)
        expect(json.issues[0]).toMatchObject({ line: 1, path: '' })
        expect(json.issues[0].message).toStartWith(message)
        expect(json.issues[0].fix).toContain(fix)
      }
      // A file that is one array, as jq -s . writes it: that one issue, not one for each line of
      // it (a pretty-printed array's "{" lines were told to run jq -c ., wrong for an array).
      const array = await rejected('\n' + JSON.stringify(requests, null, 2) + '\n')
      expect(array.issues).toEqual([expect.objectContaining({ line: 2, path: '' })])
      expect(array.issues_omitted).toBe(0)
      expect(array.issues[0].fix).toBe(
        "turn it into lines with jq -c '.[]' requests.json > requests.jsonl",
      )
      // So is one pretty-printed request: not also one "not valid JSON" for each of its lines.
      const object = await rejected(JSON.stringify(chatLine('a'), null, 2) + '\n')
      expect(object.issues).toEqual([expect.objectContaining({ line: 1, path: '' })])
      expect(object.issues_omitted).toBe(0)
      expect(object.issues[0].fix).toBe(
        'put each request on one line of its own: jq -c . requests.json > requests.jsonl',
      )
      expect(await nothingStored()).toBe(true)
    })

    test('bad JSON is reported on its line with an empty path', async () => {
      const json = await rejected(
        jsonl([chatLine('a'), '{"custom_id": "b", "method": "POST",', chatLine('c')]),
      )
      expect(json.issues).toHaveLength(1)
      expect(json.issues[0]).toMatchObject({ line: 2, path: '' })
      expect(json.issues[0].message).toContain('not valid JSON')
      expect(await nothingStored()).toBe(true)
    })

    test("bad JSON's fix names the common causes, as the live routes do", async () => {
      const trailingComma = JSON.stringify(chatLine('b')).replace(/\}$/, ',}')
      const json = await rejected(jsonl([chatLine('a'), trailingComma]))
      expect(json.issues).toEqual([
        expect.objectContaining({
          line: 2,
          path: '',
          fix: 'put exactly one complete JSON object on each line (a trailing comma or an unquoted name is a common cause)',
        }),
      ])
      expect(json.issues[0]!.message).toStartWith('is not valid JSON (')
    })

    test('a UTF-8 BOM, CRLF endings and blank lines are accepted; line numbers count blank lines', async () => {
      const text =
        '\uFEFF' +
        JSON.stringify(chatLine('a')) +
        '\r\n\r\n' +
        JSON.stringify(chatLine('b', 'héllo 東京')) +
        '\r\n'
      const ok = await gw.request('/v1/batches?dry_run=true', key, { method: 'POST', body: text })
      expect(ok.status).toBe(200)
      expect(((await ok.json()) as { line_count: number }).line_count).toBe(2)
      const bad = await rejected(
        '\uFEFF' + JSON.stringify(chatLine('a')) + '\r\n\r\n' + '{oops}\r\n',
      )
      expect(bad.issues[0]).toMatchObject({ line: 3, path: '' })
    })

    test('invalid UTF-8 is an issue on its line', async () => {
      const good = new TextEncoder().encode(JSON.stringify(chatLine('a')) + '\n')
      const broken = new TextEncoder().encode(JSON.stringify(chatLine('b', 'XX')) + '\n')
      const index = broken.indexOf(0x58) // first "X"
      broken[index] = 0xc3
      broken[index + 1] = 0x28 // 0xC3 0x28 is not valid UTF-8
      const json = await rejected(new Blob([good, broken]))
      expect(json.issues).toHaveLength(1)
      expect(json.issues[0]).toMatchObject({ line: 2, path: '', message: 'is not valid UTF-8' })
    })

    test('duplicate and over-long custom_id', async () => {
      const json = await rejected(
        jsonl([
          chatLine('same'),
          chatLine('x'.repeat(129)),
          chatLine('same'),
          chatLine('y'.repeat(128)),
        ]),
      )
      expect(json.issues).toEqual([
        expect.objectContaining({
          line: 2,
          path: 'custom_id',
          message: 'must be at most 128 characters',
        }),
        expect.objectContaining({
          line: 3,
          path: 'custom_id',
          custom_id: 'same',
          message: '"same" is already used on line 1',
        }),
      ])
    })

    test('a line without a body: one issue, whose fix shows a body', async () => {
      const { body: _, ...bodiless } = chatLine('nobody')
      const json = await rejected(jsonl([chatLine('a'), bodiless]))
      expect(json.issues).toEqual([
        {
          line: 2,
          custom_id: 'nobody',
          path: 'body',
          message: 'is required',
          fix: `add body (the request for the line's url, a JSON object, such as {"model": "…", "messages": [{"role": "user", "content": "hello"}]})`,
        },
      ])
    })

    test('lines that are request bodies alone: one issue each, saying to wrap them, with the url they read as', async () => {
      const json = await rejected(
        jsonl([
          chatLine('a').body,
          embedLine('b').body,
          { model: 'sim/chat', input: 'hello' },
          { model: 'text-embedding-3-small', input: 'hello' },
          // Wrapped, but the request left at the top.
          { custom_id: 'e', method: 'POST', url: '/v1/chat/completions', ...chatLine('e').body },
        ]),
      )
      expect(json.issues.map((i) => [i.line, i.custom_id, i.path])).toEqual([
        [1, null, ''],
        [2, null, ''],
        [3, null, ''],
        [4, null, ''],
        [5, 'e', ''],
      ])
      const [chat, embeddings, responses, unknownEmbeddings, unnested] = json.issues
      expect(chat!.message).toBe(
        'is a request body alone: a batch line wraps it with a custom_id, method and url',
      )
      expect(chat!.fix).toStartWith(
        'write the line as {"custom_id": "request-1", "method": "POST", "url": "/v1/chat/completions", "body": <this line>}',
      )
      expect(chat!.fix).toContain(
        `jq -nc '[inputs] | to_entries[] | {custom_id: "request-\\(.key + 1)", method: "POST", url: "/v1/chat/completions", body: .value}' bodies.jsonl > requests.jsonl`,
      )
      expect(embeddings!.fix).toContain('"url": "/v1/embeddings", "body": <this line>}')
      expect(responses!.fix).toContain('"url": "/v1/responses", "body": <this line>}')
      expect(unknownEmbeddings!.fix).toContain('"url": "/v1/embeddings", "body": <this line>}')
      expect(unnested!.message).toBe("has the request's model, messages at its top, outside body")
      expect(unnested!.fix).toContain("move the request's fields into body")
      expect(JSON.stringify(json.issues)).not.toContain('unknown field')
      expect(await nothingStored()).toBe(true)
    })

    test('every line must use the same url', async () => {
      const json = await rejected(jsonl([chatLine('a'), embedLine('b'), chatLine('c')]))
      expect(json.issues).toEqual([expect.objectContaining({ line: 2, path: 'url' })])
      expect(json.issues[0].fix).toContain('/v1/chat/completions')
    })

    test('unknown model, and a model that does not serve the endpoint', async () => {
      const json = await rejected(
        jsonl([chatLine('a', 'hi', {}, 'no/such-model'), chatLine('b', 'hi', {}, 'sim/embed')]),
      )
      expect(json.issues).toEqual([
        expect.objectContaining({
          line: 1,
          path: 'body.model',
          code: 'model_not_found',
          message: 'names an unknown model, "no/such-model"',
        }),
        expect.objectContaining({
          line: 2,
          path: 'body.model',
          message: 'sim/embed does not serve /v1/chat/completions',
        }),
      ])
    })

    test("a service tier other than the provider's default is refused: the offering's lane sets it", async () => {
      const json = await rejected(
        jsonl([
          chatLine('a', 'hi', { service_tier: 'priority' }),
          chatLine('b', 'hi', { service_tier: 'flex' }),
          chatLine('c', 'hi', { service_tier: 'default' }),
          chatLine('d', 'hi', { service_tier: 'auto' }),
          chatLine('e', 'hi', { service_tier: 'x'.repeat(10_000) }),
        ]),
      )
      expect(json.issues.map((issue) => [issue.line, issue.path])).toEqual([
        [1, 'body.service_tier'],
        [2, 'body.service_tier'],
        [5, 'body.service_tier'],
      ])
      // What the caller sent is echoed in a few dozen characters, not whole.
      expect(json.issues[2].message.length).toBeLessThan(300)
      expect(json.issues[0].message).toContain('"priority"')
      expect(json.issues[1].fix).toContain('provider.only')
    })

    test('a model whose provider has no key names the variable to set', async () => {
      const json = await rejected(jsonl([chatLine('a', 'hi', {}, 'paid/chat')]))
      expect(json.issues[0]).toMatchObject({ line: 1, path: 'body.model' })
      expect(json.issues[0].fix).toContain('MG_TEST_PAID_KEY')
    })

    test('stream: true and n > 8 are refused', async () => {
      const json = await rejected(
        jsonl([chatLine('a', 'hi', { stream: true }), chatLine('b', 'hi', { n: 9 })]),
      )
      expect(json.issues).toEqual([
        expect.objectContaining({
          line: 1,
          path: 'body.stream',
          message: 'a batch line cannot stream',
        }),
        expect.objectContaining({ line: 2, path: 'body.n', message: 'must be at most 8' }),
      ])
    })

    test('max_tokens above the model limit, unsupported parameters, bad messages', async () => {
      const json = await rejected(
        jsonl([
          chatLine('a', 'hi', { max_tokens: 5000 }),
          chatLine('b', 'hi', { temperature: 0.2 }, 'sim/strict'),
          {
            custom_id: 'c',
            method: 'POST',
            url: '/v1/chat/completions',
            body: { model: 'sim/chat', messages: [] },
          },
          {
            custom_id: 'd',
            method: 'POST',
            url: '/v1/chat/completions',
            body: { model: 'sim/chat', messages: [{ role: 'robot', content: 'x' }] },
          },
          {
            custom_id: 'e',
            method: 'GET',
            url: '/v1/chat/completions',
            body: { model: 'sim/chat', messages: [{ role: 'user', content: 'x' }] },
          },
          { custom_id: 'f', method: 'POST', url: '/v1/responses', body: {} },
          { custom_id: 7, method: 'POST', url: '/v1/chat/completions', body: chatLine('g').body },
        ]),
      )
      expect(json.issues.map((i) => [i.line, i.path])).toEqual([
        [1, 'body.max_tokens'],
        [2, 'body.temperature'],
        [3, 'body.messages'],
        [4, 'body.messages.0.role'],
        [5, 'method'],
        [6, 'url'],
        [7, 'custom_id'],
      ])
      expect(json.issues[0].message).toBe('must be at most 4096 for sim/chat')
      expect(json.issues[0].fix).toBe('set max_tokens to 4096 or less')
      expect(json.issues[1].message).toBe('is not supported by sim/strict')
    })

    test('30 bad lines: 25 issues shown in line order, 5 omitted', async () => {
      const lines = Array.from({ length: 30 }, (_, i) => chatLine(`l${i}`, 'hi', { n: 10 }))
      const json = await rejected(jsonl(lines))
      expect(json.issues).toHaveLength(25)
      expect(json.issues_omitted).toBe(5)
      expect(json.issues.map((i) => i.line)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1))
      expect(json.error.message).toBe('30 problems in the file; nothing was submitted')
    })

    test('more than 50,000 lines is refused on line 50,001', async () => {
      const line = JSON.stringify({
        custom_id: 'X',
        method: 'POST',
        url: '/v1/embeddings',
        body: { model: 'sim/embed', input: 'a' },
      })
      const parts: string[] = []
      for (let i = 1; i <= 50_001; i++) parts.push(line.replace('"X"', `"${i}"`))
      const json = await rejected(parts.join('\n'))
      expect(json.issues).toEqual([expect.objectContaining({ line: 50_001, path: '' })])
      expect(json.issues[0].message).toBe('the file has more than 50000 requests')
    })

    test('more than 16 MiB is refused with 413, by Content-Length and mid-stream', async () => {
      const big = new Uint8Array(16 * 1024 * 1024 + 1).fill(0x20)
      const declared = await submit(big)
      expect(declared.status).toBe(413)
      expect(((await declared.json()) as IssueBody).error.code).toBe('file_too_large')
      // Chunked upload without a Content-Length: refused once the limit is crossed.
      const chunk = new Uint8Array(1024 * 1024).fill(0x20)
      let sent = 0
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent >= 17) return controller.close()
          sent++
          controller.enqueue(chunk)
        },
      })
      const streamed = await submit(stream as unknown as BodyInit)
      expect(streamed.status).toBe(413)
      expect(await nothingStored()).toBe(true)
    })

    test('an empty body, or one of only newlines, says so', async () => {
      for (const body of ['', '\n\n\n']) {
        const json = await rejected(body)
        expect(json.issues[0]).toMatchObject({
          line: 1,
          path: '',
          message: 'the file has no requests',
        })
        // Said for the native body and an uploaded file alike.
        expect(json.issues[0].fix).toStartWith('put one request per line')
      }
    })

    test('an OpenAI-shaped create is pointed at /openai/v1', async () => {
      const response = await submit(
        JSON.stringify({
          input_file_id: 'file-abc',
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        }),
        '',
        { 'content-type': 'application/json' },
      )
      expect(response.status).toBe(400)
      const json = (await response.json()) as IssueBody
      expect(json.error.code).toBe('wrong_api_surface')
      expect(json.error.message).toContain('/openai/v1')
    })

    test('multipart and compressed bodies are refused with what to send instead', async () => {
      const form = new FormData()
      form.set('file', new Blob([jsonl([chatLine('a')])]), 'requests.jsonl')
      const multipart = await gw.request('/v1/batches', key, { method: 'POST', body: form })
      expect(multipart.status).toBe(415)
      expect(((await multipart.json()) as IssueBody).error.message).toContain('--data-binary')
      const gz = await submit(Bun.gzipSync(new TextEncoder().encode(jsonl([chatLine('a')]))))
      expect(gz.status).toBe(400)
      expect(((await gz.json()) as IssueBody).error.code).toBe('unsupported_encoding')
    })

    test('completion_window_hours must be 1–168', async () => {
      for (const hours of ['0', '169', 'abc', '2.5']) {
        const response = await submit(jsonl([chatLine('a')]), `?completion_window_hours=${hours}`)
        expect(response.status).toBe(400)
        const json = (await response.json()) as IssueBody
        expect(json.error.message).toContain('completion_window_hours')
      }
      expect(await nothingStored()).toBe(true)
    })
  })
}
