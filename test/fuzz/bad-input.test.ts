/**
 * A corpus of malformed submissions (bad-input-corpus.ts) and malformed ids and query parameters:
 * every answer is a 4xx that says what was wrong, nothing is stored, and the server keeps serving.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { BAD_SUBMISSIONS, CORPUS_MAX_LINES, type BadSubmission } from './bad-input-corpus.ts'
import { refusalProblems } from './refusal.ts'

for (const storeKind of STORES) {
  describe(`malformed input (${storeKind})`, () => {
    let gw: TestGateway
    let key: string
    let accountId: string
    const logLines: string[] = []

    beforeAll(async () => {
      gw = await startTestGateway({
        store: storeKind,
        env: { MULTIGRID_DISPATCH: '0', MULTIGRID_MAX_LINES: String(CORPUS_MAX_LINES) },
        logLines,
      })
      ;({ key, accountId } = await gw.newAccount('100', { rate_limit_per_minute: 1_000_000 }))
    })
    afterAll(async () => {
      await gw.stop()
      // No request ended in the handler for bugs.
      expect(logLines.filter((line) => line.includes('http.unhandled'))).toEqual([])
    })

    async function send(entry: BadSubmission) {
      const headers: Record<string, string> = { ...entry.headers }
      if (entry.contentType !== null)
        headers['content-type'] = entry.contentType ?? 'application/jsonl'
      const response = await gw.request(`/v1/batches${entry.query ?? ''}`, key, {
        method: 'POST',
        body: entry.body(),
        headers,
      })
      return { status: response.status, text: await response.text() }
    }

    test(`${BAD_SUBMISSIONS.length} malformed submissions: each a 4xx that says what is wrong`, async () => {
      expect(BAD_SUBMISSIONS.length).toBeGreaterThanOrEqual(60)
      const failures: string[] = []
      for (const entry of BAD_SUBMISSIONS) {
        const { status, text } = await send(entry)
        for (const problem of refusalProblems(status, text, entry))
          failures.push(`${entry.name}: ${problem}`)
      }
      expect(failures).toEqual([])
      // Nothing was stored or held, and the server still serves a valid submit.
      const list = (await (await gw.request('/v1/batches', key)).json()) as { data: unknown[] }
      expect(list.data).toHaveLength(0)
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        held_usd: string
      }
      expect(account.held_usd).toBe('0.000000')
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
      const valid = await gw.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl([chatLine('after')]),
      })
      expect(valid.status).toBe(201)
    })

    test('malformed ids and query parameters on every read endpoint: 4xx, never 5xx', async () => {
      const ids = [
        '%00',
        'batch_%00',
        'a'.repeat(5000),
        '%F0%9F%92%A9',
        '..%2F..%2Fetc',
        "1'%20OR%20'1'='1",
        '%ED%A0%80',
      ]
      const requests: [string, string][] = []
      for (const id of ids) {
        requests.push(['GET', `/v1/batches/${id}`], ['DELETE', `/v1/batches/${id}`])
        requests.push(
          ['GET', `/v1/batches/${id}/results`],
          ['GET', `/v1/batches/${id}/results?filter=failed`],
        )
        requests.push(
          ['GET', `/openai/v1/batches/${id}`],
          ['POST', `/openai/v1/batches/${id}/cancel`],
        )
        requests.push(['GET', `/openai/v1/files/${id}`], ['GET', `/openai/v1/files/${id}/content`])
        requests.push(['DELETE', `/openai/v1/files/${id}`])
        requests.push(['GET', `/v1/batches?after=${id}`], ['GET', `/openai/v1/batches?after=${id}`])
        requests.push(
          ['GET', `/openai/v1/files?after=${id}`],
          ['GET', `/openai/v1/files?purpose=${id}`],
        )
      }
      for (const limit of [
        '0',
        '-1',
        '101',
        'abc',
        '1.5',
        '1e9',
        '',
        '%00',
        '0x10',
        '1e1',
        '%2010',
        '5.0',
      ]) {
        requests.push(
          ['GET', `/v1/batches?limit=${limit}`],
          ['GET', `/openai/v1/batches?limit=${limit}`],
        )
      }
      for (const limit of ['0', '-1', '10001', 'abc', '1.5', '', '%00', '0x10', '1e2', '%2010'])
        requests.push(['GET', `/openai/v1/files?limit=${limit}`])
      const batch = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl([chatLine('q')]) })
      ).json()) as { id: string }
      for (const query of ['filter=nope', 'format=csv', 'filter=', 'filter=failed&format=%00']) {
        requests.push(['GET', `/v1/batches/${batch.id}/results?${query}`])
      }
      requests.push(['GET', '/openai/v1/files?order=sideways'])
      const failures: string[] = []
      for (const [method, path] of requests) {
        const response = await gw.request(path, key, { method })
        const text = await response.text()
        // A list with an unknown cursor may answer 200 with an empty page.
        if (response.status === 200 && method === 'GET' && /after=|purpose=/.test(path)) continue
        for (const problem of refusalProblems(response.status, text))
          failures.push(`${method} ${path.slice(0, 80)}: ${problem}`)
      }
      expect(failures).toEqual([])
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
    })

    test('bodies nested 100,000 deep on the live and facade endpoints: 400, never 5xx', async () => {
      const deep = '['.repeat(100_000) + ']'.repeat(100_000)
      // The create's body limit is 64 KiB (http/body-limits.ts): 30,000 deep fits in it.
      const deepCreate = '['.repeat(30_000) + ']'.repeat(30_000)
      const chat = `{"model":"sim/chat","max_tokens":8,"messages":[{"role":"user","content":"hi","x":${deep}}]}`
      const bodies: [string, string][] = [
        ['/v1/chat/completions', chat],
        ['/openai/v1/chat/completions', chat],
        ['/v1/embeddings', `{"model":"sim/embed","input":"hi","x":${deep}}`],
        [
          '/openai/v1/batches',
          `{"input_file_id":"file-x","endpoint":"/v1/embeddings","completion_window":"24h","metadata":${deepCreate}}`,
        ],
        ['/openai/v1/batches', `{"extra_body":${deepCreate}}`],
        ['/openai/v1/batches', deepCreate],
      ]
      const failures: string[] = []
      for (const [path, body] of bodies) {
        const response = await gw.request(path, key, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json' },
        })
        const problems = refusalProblems(response.status, await response.text(), { status: 400 })
        for (const problem of problems) failures.push(`${path}: ${problem}`)
      }
      expect(failures).toEqual([])
    })
  })
}
