/** The native batch API without dispatch: admission, money, read, list, cancel, results, auth, limits. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { editBatchRow } from '../helpers/edit-batch.ts'
import {
  ADMIN_TOKEN,
  chatLine,
  jsonl,
  startTestGateway,
  STORES,
  type TestGateway,
} from '../helpers/gateway.ts'

type Batch = {
  id: string
  status: string
  name: string | null
  line_count: number
  created_at: number
  deadline_at: number
  completion_window_hours: number
  cost_ceiling_usd: string
  cost_usd: string
  request_counts: Record<string, number>
  results_url: string
}

for (const storeKind of STORES) {
  describe(`native batch API (${storeKind})`, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
    })
    afterAll(() => gw.stop())

    const submit = (
      key: string,
      lines: unknown[],
      query = '',
      headers: Record<string, string> = {},
    ) => gw.request(`/v1/batches${query}`, key, { method: 'POST', body: jsonl(lines), headers })
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as Record<string, string | number>

    test('a valid file is admitted: 201, the batch object, the ceiling held', async () => {
      const { key, accountId } = await gw.newAccount('1')
      // The body sent upstream, {"model":"sim-chat","messages":[{"role":"user","content":"hello"}],"max_tokens":32},
      // is 83 bytes, + 4 per message + 3 priming = 90 input tokens; 32 output tokens.
      // (90 × 0.50 + 32 × 1.50) / 1e6 = 0.000093 per line.
      const response = await submit(
        key,
        [chatLine('a'), chatLine('b')],
        '?name=nightly&completion_window_hours=48',
      )
      expect(response.status).toBe(201)
      const batch = (await response.json()) as Batch
      expect(batch).toMatchObject({
        object: 'batch',
        name: 'nightly',
        endpoint: '/v1/chat/completions',
        status: 'in_progress',
        completion_window_hours: 48,
        line_count: 2,
        cost_ceiling_usd: '0.000186',
        cost_usd: '0.000000',
        results_url: `/v1/batches/${batch.id}/results`,
      })
      expect(batch.request_counts).toEqual({
        total: 2,
        pending: 2,
        running: 0,
        succeeded: 0,
        failed: 0,
        cancelled: 0,
        expired: 0,
      })
      expect(batch.deadline_at - batch.created_at).toBe(48 * 3600)
      expect(batch.id).toMatch(/^batch_/)
      expect(await account(accountId)).toMatchObject({
        balance_usd: '1.000000',
        held_usd: '0.000186',
        available_usd: '0.999814',
        open_batches: 1,
      })
    })

    test('the name can come from X-Multigrid-Batch-Name; the window defaults to 24 h', async () => {
      const { key } = await gw.newAccount('1')
      const batch = (await (
        await submit(key, [chatLine('a')], '', { 'x-multigrid-batch-name': 'from-header' })
      ).json()) as Batch
      expect(batch.name).toBe('from-header')
      expect(batch.completion_window_hours).toBe(24)
      expect(batch.deadline_at - batch.created_at).toBe(24 * 3600)
    })

    test('a name counts characters, not UTF-16 units; the header takes UTF-8 as curl sends it, under the same rules', async () => {
      const { key } = await gw.newAccount('1')
      const named = async (query: string, headers: Record<string, string> = {}) => {
        const response = await submit(key, [chatLine('a')], `?dry_run=true${query}`, headers)
        return { status: response.status, body: (await response.json()) as Record<string, any> }
      }
      // 256 emoji are 512 UTF-16 units and 256 characters: taken; one more is not.
      expect((await named(`&name=${encodeURIComponent('😀'.repeat(256))}`)).status).toBe(200)
      const long = await named(`&name=${encodeURIComponent('😀'.repeat(257))}`)
      expect(long.status).toBe(400)
      expect(long.body.error.message).toBe(
        'query parameter name must be at most 256 characters; shorten name to 256 characters or fewer',
      )
      // A header's bytes reach the server as Latin-1; raw UTF-8 is what curl -H sends.
      const raw = (text: string) => Buffer.from(text, 'utf8').toString('latin1')
      const label = 'été-日本-😀'
      const stored = (await (
        await submit(key, [chatLine('a')], '', { 'x-multigrid-batch-name': raw(label) })
      ).json()) as Batch
      expect(stored.name).toBe(label)
      const header = await named('', { 'x-multigrid-batch-name': raw('日'.repeat(257)) })
      expect(header.status).toBe(400)
      expect(header.body.error.message).toBe(
        'name must be at most 256 characters; shorten name to 256 characters or fewer',
      )
      expect((await named('', { 'x-multigrid-batch-name': raw('日'.repeat(256)) })).status).toBe(
        200,
      )
    })

    test('a query parameter given twice is refused, never one of its values taken', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const twice = await submit(key, [chatLine('a')], '?dry_run=true&dry_run=false')
      expect(twice.status).toBe(400)
      const { error } = (await twice.json()) as { error: { message: string; param: string } }
      expect(error.param).toBe('dry_run')
      expect(error.message).toBe(
        'query parameter dry_run is given more than once; send it once, with the one value you mean',
      )
      expect((await account(accountId)).held_usd).toBe('0.000000')
      const listed = await gw.request('/v1/batches?limit=1&limit=2', key)
      expect(listed.status).toBe(400)
      const usage = await gw.request('/v1/usage?from=2026-01-01&to=2026-01-02&to=2026-01-03', key)
      expect(usage.status).toBe(400)
      expect(((await usage.json()) as { error: { param: string } }).error.param).toBe('to')
    })

    test('a submit refuses a query parameter it does not take, naming the one likely meant; nothing is stored or held', async () => {
      const { key, accountId } = await gw.newAccount('1')
      for (const [query, meant] of [
        ['?dryrun=true', 'dry_run'],
        ['?dry-run=true', 'dry_run'],
        ['?Dry_Run=1', 'dry_run'],
        ['?max_cost=0.5', 'max_cost_usd'],
        ['?deadline=24', 'completion_window_hours'],
        ['?bogus=1', null],
        ['?__proto__=1', null],
        ['?constructor=1', null],
      ] as const) {
        const refused = await submit(key, [chatLine('a')], query)
        expect(refused.status).toBe(400)
        const { error } = (await refused.json()) as { error: { message: string; param: string } }
        const typed = query.slice(1, query.indexOf('='))
        expect(error.param).toBe(typed)
        expect(error.message).toStartWith(`unknown query parameter ${typed}`)
        if (meant) expect(error.message).toContain(`did you mean ${meant}?`)
        else expect(error.message).not.toContain('did you mean')
        expect(error.message).toMatch(/[Tt]his route takes name, completion_window_hours, dry_run/)
      }
      expect((await account(accountId)).held_usd).toBe('0.000000')
      const listed = (await (await gw.request('/v1/batches', key)).json()) as { data: unknown[] }
      expect(listed.data).toEqual([])
    })

    test('the ceiling uses max_tokens × n, or the model limit when absent', async () => {
      const { key } = await gw.newAccount('10')
      const noMax = {
        custom_id: 'x',
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'sim/chat', messages: [{ role: 'user', content: 'hello' }] },
      }
      type Quote = {
        cost_ceiling_usd: string
        warnings: { line: number; custom_id: string; param: string; message: string; fix: string }[]
      }
      const quoted = async (line: unknown) =>
        (await (await submit(key, [line], '?dry_run=true')).json()) as Quote
      const quote = async (line: unknown) => (await quoted(line)).cost_ceiling_usd
      // 67 bytes sent + 7: (74 × 0.5 + 4096 × 1.5) / 1e6 = 0.006181
      expect(await quote(noMax)).toBe('0.006181')
      // n = 3: 89 bytes sent + 7: (96 × 0.5 + 96 × 1.5) / 1e6 = 0.000192
      expect(await quote(chatLine('n', 'hello', { n: 3 }))).toBe('0.000192')
      // The quote says why the line without a limit costs 30 times more, and what to set.
      expect((await quoted(noMax)).warnings).toEqual([
        {
          line: 1,
          custom_id: 'x',
          param: 'body.max_tokens',
          message: expect.stringContaining("sim/chat's whole output limit, 4,096 tokens"),
          fix: expect.stringContaining('set max_tokens to the most an answer needs'),
        },
      ])
      expect((await quoted(chatLine('n', 'hello', { n: 3 }))).warnings).toEqual([])
      // A Responses line is told in its own terms.
      const responses = (await quoted({
        custom_id: 'r',
        method: 'POST',
        url: '/v1/responses',
        body: { model: 'sim/chat', input: 'hello' },
      })) as Quote
      expect(responses.warnings.map((w) => [w.param, w.message.split(' ')[0]])).toEqual([
        ['body.max_output_tokens', 'max_output_tokens'],
      ])
    })

    test('dry_run quotes without storing, also when the credit would not cover it', async () => {
      const { key, accountId } = await gw.newAccount('0.0001')
      const response = await submit(
        key,
        [chatLine('a'), chatLine('b'), chatLine('c')],
        '?dry_run=true',
      )
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({
        line_count: 3,
        cost_ceiling_usd: '0.000279',
        credit_sufficient: false,
      })
      const ok = await submit(key, [chatLine('a')], '?dry_run=true')
      expect(await ok.json()).toMatchObject({
        line_count: 1,
        cost_ceiling_usd: '0.000093',
        credit_sufficient: true,
      })
      const list = (await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }
      expect(list.data).toHaveLength(0)
      expect(await account(accountId)).toMatchObject({ held_usd: '0.000000', open_batches: 0 })
    })

    test('402 insufficient_quota when the ceiling does not fit; nothing stored or held', async () => {
      const { key, accountId } = await gw.newAccount('0.0001')
      const response = await submit(key, [chatLine('a'), chatLine('b')])
      expect(response.status).toBe(402)
      const body = (await response.json()) as { error: Record<string, unknown> }
      expect(body.error).toMatchObject({
        code: 'insufficient_quota',
        cost_ceiling_usd: '0.000186',
        available_usd: '0.000100',
      })
      expect(
        ((await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }).data,
      ).toHaveLength(0)
      expect(await account(accountId)).toMatchObject({
        held_usd: '0.000000',
        balance_usd: '0.000100',
      })
    })

    test('Idempotency-Key returns the batch the first submit made', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const first = (await (
        await submit(key, [chatLine('a')], '', { 'idempotency-key': 'k-1' })
      ).json()) as Batch
      const again = await submit(key, [chatLine('a')], '', { 'idempotency-key': 'k-1' })
      expect(again.status).toBe(200)
      expect(((await again.json()) as Batch).id).toBe(first.id)
      expect(
        ((await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }).data,
      ).toHaveLength(1)
      expect(await account(accountId)).toMatchObject({ held_usd: '0.000093' })
    })

    test('the same Idempotency-Key with another file or other options is 422 idempotency_key_reused naming the first batch; nothing more is stored or held', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const headers = { 'idempotency-key': 'k-2' }
      const first = (await (await submit(key, [chatLine('a')], '', headers)).json()) as Batch
      const others: [unknown[], string][] = [
        [[chatLine('b')], ''],
        [[chatLine('a'), chatLine('b')], ''],
        [[chatLine('a')], '?name=another'],
        [[chatLine('a')], '?completion_window_hours=48'],
        [[chatLine('a')], '?max_cost_usd=0.5'],
      ]
      for (const [lines, query] of others) {
        const again = await submit(key, lines, query, headers)
        expect(again.status).toBe(422)
        const { error } = (await again.json()) as { error: Record<string, unknown> }
        expect(error).toMatchObject({
          code: 'idempotency_key_reused',
          type: 'invalid_request_error',
          batch_id: first.id,
        })
        expect(error.message).toContain(first.id)
      }
      // The first request, unchanged, still gets its batch, also with an option sent as the
      // default it was left at; a dry run ignores the key.
      for (const query of ['', '?completion_window_hours=24&wait_for_credit=false']) {
        const same = await submit(key, [chatLine('a')], query, headers)
        expect(same.status).toBe(200)
        expect(((await same.json()) as Batch).id).toBe(first.id)
      }
      expect((await submit(key, [chatLine('b')], '?dry_run=true', headers)).status).toBe(200)
      const listed = (await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }
      expect(listed.data.map((batch) => batch.id)).toEqual([first.id])
      expect(await account(accountId)).toMatchObject({ held_usd: '0.000093' })
    })

    test('two submits with one Idempotency-Key and different files at once: one batch, the other refused 422', async () => {
      const { key } = await gw.newAccount('1')
      const headers = { 'idempotency-key': 'k-race' }
      // Files of 2,000 lines: both look the key up before either is validated and stored, so
      // the second meets the first's batch at its admission.
      const file = (prefix: string) =>
        Array.from({ length: 2_000 }, (_, i) => chatLine(`${prefix}-${i}`))
      const answers = await Promise.all([
        submit(key, file('a'), '', headers),
        submit(key, file('b'), '', headers),
      ])
      expect(answers.map((answer) => answer.status).sort()).toEqual([201, 422])
      const listed = (await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }
      expect(listed.data).toHaveLength(1)
    })

    test('a batch made under a key before its request was hashed answers any request with the key, as it did', async () => {
      const { key } = await gw.newAccount('1')
      const headers = { 'idempotency-key': 'k-old' }
      const first = (await (await submit(key, [chatLine('a')], '', headers)).json()) as Batch
      await editBatchRow(gw, first.id, 'request_hash = NULL')
      const other = await submit(key, [chatLine('b')], '', headers)
      expect(other.status).toBe(200)
      expect(((await other.json()) as Batch).id).toBe(first.id)
    })

    test('open-batch limit: 429 limit_exceeded with error.limit', async () => {
      const { key } = await gw.newAccount('10', {}, { max_open_batches: 2 })
      expect((await submit(key, [chatLine('a')])).status).toBe(201)
      expect((await submit(key, [chatLine('a')])).status).toBe(201)
      const third = await submit(key, [chatLine('a')])
      expect(third.status).toBe(429)
      const body = (await third.json()) as { error: Record<string, unknown> }
      expect(body.error).toMatchObject({
        code: 'limit_exceeded',
        limit: { open_batches: 2, in_use: 2 },
      })
    })

    test('get and list: newest first, limit/after paging with has_more', async () => {
      const { key } = await gw.newAccount('10', {}, { max_open_batches: 10 })
      const ids: string[] = []
      for (let i = 0; i < 5; i++)
        ids.push(((await (await submit(key, [chatLine('a')], `?name=b${i}`)).json()) as Batch).id)
      const got = (await (await gw.request(`/v1/batches/${ids[2]}`, key)).json()) as Batch
      expect(got).toMatchObject({ id: ids[2], name: 'b2' })
      const newestFirst = [...ids].reverse()
      const page1 = (await (await gw.request('/v1/batches?limit=2', key)).json()) as {
        data: Batch[]
        has_more: boolean
        first_id: string
        last_id: string
      }
      expect(page1.data.map((b) => b.id)).toEqual(newestFirst.slice(0, 2))
      expect(page1).toMatchObject({
        object: 'list',
        has_more: true,
        first_id: newestFirst[0],
        last_id: newestFirst[1],
      })
      const page2 = (await (
        await gw.request(`/v1/batches?limit=2&after=${page1.last_id}`, key)
      ).json()) as typeof page1
      expect(page2.data.map((b) => b.id)).toEqual(newestFirst.slice(2, 4))
      const page3 = (await (
        await gw.request(`/v1/batches?limit=2&after=${page2.last_id}`, key)
      ).json()) as typeof page1
      expect(page3.data.map((b) => b.id)).toEqual(newestFirst.slice(4))
      expect(page3.has_more).toBe(false)
      expect((await gw.request('/v1/batches?limit=101', key)).status).toBe(400)
    })

    test('cancel: pending lines end cancelled, the hold is released, a second cancel is 409', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const batch = (await (
        await submit(key, [chatLine('a'), chatLine('b'), chatLine('c')])
      ).json()) as Batch
      const cancelled = await gw.request(`/v1/batches/${batch.id}`, key, { method: 'DELETE' })
      expect(cancelled.status).toBe(200)
      const body = (await cancelled.json()) as Batch
      expect(body.status).toBe('cancelled')
      expect(body.request_counts).toMatchObject({ pending: 0, cancelled: 3 })
      expect(await account(accountId)).toMatchObject({
        held_usd: '0.000000',
        balance_usd: '1.000000',
        open_batches: 0,
      })
      const again = await gw.request(`/v1/batches/${batch.id}`, key, { method: 'DELETE' })
      expect(again.status).toBe(409)
      expect(((await again.json()) as { error: Record<string, unknown> }).error).toMatchObject({
        code: 'batch_not_cancellable',
        status: 'cancelled',
      })
    })

    test('results: submitted order, filters, format=input, X-Multigrid-Batch-Status', async () => {
      const { key } = await gw.newAccount('1')
      const lines = [chatLine('t-1', 'one'), chatLine('t-2', 'two'), chatLine('t-3', 'three')]
      const batch = (await (await submit(key, lines)).json()) as Batch
      const pending = await gw.request(`/v1/batches/${batch.id}/results`, key)
      expect(pending.headers.get('content-type')).toBe('application/jsonl')
      expect(pending.headers.get('x-multigrid-batch-status')).toBe('in_progress')
      const rows = (await pending.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(rows).toEqual([
        { custom_id: 't-1', line: 1, status: 'pending', response: null, error: null },
        { custom_id: 't-2', line: 2, status: 'pending', response: null, error: null },
        { custom_id: 't-3', line: 3, status: 'pending', response: null, error: null },
      ])
      expect(
        await (await gw.request(`/v1/batches/${batch.id}/results?filter=failed`, key)).text(),
      ).toBe('')
      await gw.request(`/v1/batches/${batch.id}`, key, { method: 'DELETE' })
      const failed = await gw.request(`/v1/batches/${batch.id}/results?filter=failed`, key)
      expect(failed.headers.get('x-multigrid-batch-status')).toBe('cancelled')
      // Every answer about the batch says its status, a refused filter's too.
      const refused = await gw.request(`/v1/batches/${batch.id}/results?filter=bogus`, key)
      expect(refused.status).toBe(400)
      expect(refused.headers.get('x-multigrid-batch-status')).toBe('cancelled')
      const failedRows = (await failed.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(failedRows.map((r) => [r.custom_id, r.status, r.error.code])).toEqual([
        ['t-1', 'cancelled', 'batch_cancelled'],
        ['t-2', 'cancelled', 'batch_cancelled'],
        ['t-3', 'cancelled', 'batch_cancelled'],
      ])
      expect(
        await (await gw.request(`/v1/batches/${batch.id}/results?filter=succeeded`, key)).text(),
      ).toBe('')
      const input = await (
        await gw.request(`/v1/batches/${batch.id}/results?filter=failed&format=input`, key)
      ).text()
      expect(input).toBe(jsonl(lines))
      // …ready to submit again.
      expect((await gw.request('/v1/batches', key, { method: 'POST', body: input })).status).toBe(
        201,
      )
      expect((await gw.request(`/v1/batches/${batch.id}/results?filter=nope`, key)).status).toBe(
        400,
      )
    })

    test('results refuse a query parameter they do not take, rather than answer every line', async () => {
      const { key } = await gw.newAccount('1')
      const batch = (await (await submit(key, [chatLine('t-1')])).json()) as Batch
      // `?status=failed&format=input` once gave back every input line, ready to be run and paid again.
      for (const [query, meant] of [
        ['?status=failed&format=input', 'filter'],
        ['?filters=failed', 'filter'],
        ['?Format=input', 'format'],
      ] as const) {
        const refused = await gw.request(`/v1/batches/${batch.id}/results${query}`, key)
        expect(refused.status).toBe(400)
        expect(refused.headers.get('x-multigrid-batch-status')).toBe(batch.status)
        const { error } = (await refused.json()) as { error: { message: string; param: string } }
        const typed = query.slice(1, query.indexOf('='))
        expect(error.param).toBe(typed)
        expect(error.message).toStartWith(`unknown query parameter ${typed}`)
        if (meant) expect(error.message).toContain(`did you mean ${meant}?`)
        expect(error.message).toMatch(/[Tt]his route takes filter, format$/)
      }
    })

    test('format=input gives back each line byte for byte, without the BOM and CRs it came with', async () => {
      const { key } = await gw.newAccount('1')
      const lines = [
        chatLine('u-1', 'café crème'),
        chatLine('u-2', '日本語のテキスト'),
        chatLine('u-3', 'emoji 🚀 and \\ backslash'),
        chatLine('u-4', 'plain'),
      ]
      const texts = lines.map((line) => JSON.stringify(line))
      const body = `\uFEFF${texts.join('\r\n')}\r\n`
      const batch = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body })
      ).json()) as Batch
      expect(batch.line_count).toBe(4)
      const input = await (
        await gw.request(`/v1/batches/${batch.id}/results?format=input`, key)
      ).text()
      expect(input).toBe(texts.map((text) => `${text}\n`).join(''))
    })

    test("another account's batch is a 404 on every endpoint", async () => {
      const owner = await gw.newAccount('1')
      const other = await gw.newAccount('1')
      const batch = (await (await submit(owner.key, [chatLine('a')])).json()) as Batch
      for (const [path, method] of [
        [`/v1/batches/${batch.id}`, 'GET'],
        [`/v1/batches/${batch.id}/results`, 'GET'],
        [`/v1/batches/${batch.id}`, 'DELETE'],
      ]) {
        const response = await gw.request(path, other.key, { method })
        expect(response.status).toBe(404)
        expect(((await response.json()) as { error: Record<string, unknown> }).error.type).toBe(
          'not_found_error',
        )
      }
      const list = (await (await gw.request('/v1/batches', other.key)).json()) as { data: Batch[] }
      expect(list.data).toHaveLength(0)
      expect(
        ((await (await gw.request(`/v1/batches/${batch.id}`, owner.key)).json()) as Batch).status,
      ).toBe('in_progress')
    })

    test('keys: missing, malformed, unknown and revoked keys are 401; a key without the scope is 403', async () => {
      const { accountId, key, keyId } = await gw.newAccount('1')
      expect((await gw.request('/v1/batches', null)).status).toBe(401)
      const malformed = await gw.request('/v1/batches', null, {
        headers: { authorization: 'Token abc' },
      })
      expect(malformed.status).toBe(401)
      expect(((await malformed.json()) as { error: Record<string, unknown> }).error.code).toBe(
        'invalid_api_key',
      )
      const message = async (response: Response) =>
        ((await response.json()) as { error: { message: string } }).error.message
      const unknown = await gw.request('/v1/batches', 'mg_not-a-real-key')
      expect(unknown.status).toBe(401)
      expect(await message(unknown)).toBe('unknown or revoked API key')
      // Another service's key is named for what it is, and so is an API key sent as the admin token.
      const foreign = await gw.request('/v1/batches', 'sk-proj-abc123')
      expect(foreign.status).toBe(401)
      expect(await message(foreign)).toContain('not a Multigrid API key (they start with mg_)')
      const asAdmin = await fetch(`${gw.url}/admin/v1/accounts/${accountId}`, {
        headers: { authorization: `Bearer ${key}` },
      })
      expect(asAdmin.status).toBe(401)
      expect(await message(asAdmin)).toContain('that is an API key, not the admin token')
      expect((await gw.request('/v1/batches', key)).status).toBe(200)
      expect((await gw.admin(`/keys/${keyId}`, { method: 'DELETE' })).status).toBe(200)
      expect((await gw.request('/v1/batches', key)).status).toBe(401)

      const inferenceOnly = (await (
        await gw.admin(`/accounts/${accountId}/keys`, { body: { scopes: ['inference'] } })
      ).json()) as { key: string }
      const refused = await gw.request('/v1/batches', inferenceOnly.key, {
        method: 'POST',
        body: jsonl([chatLine('a')]),
      })
      expect(refused.status).toBe(403)
      expect(((await refused.json()) as { error: Record<string, unknown> }).error.code).toBe(
        'insufficient_permissions',
      )
      const readOnly = (await (
        await gw.admin(`/accounts/${accountId}/keys`, { body: { scopes: ['read'] } })
      ).json()) as { key: string }
      expect((await gw.request('/v1/batches', readOnly.key)).status).toBe(200)
      expect(
        (
          await gw.request('/v1/batches', readOnly.key, {
            method: 'POST',
            body: jsonl([chatLine('a')]),
          })
        ).status,
      ).toBe(403)
    })

    test('rate limit: headers on every authenticated answer, 429 with Retry-After past it', async () => {
      const { key } = await gw.newAccount('1', { rate_limit_per_minute: 3 })
      const first = await gw.request('/v1/batches', key)
      expect(first.headers.get('x-ratelimit-limit')).toBe('3')
      expect(first.headers.get('x-ratelimit-remaining')).toBe('2')
      expect(Number(first.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0)
      const missing = await gw.request('/v1/batches/batch_nope', key)
      expect(missing.status).toBe(404)
      expect(missing.headers.get('x-ratelimit-remaining')).toBe('1')
      expect((await gw.request('/v1/batches', key)).headers.get('x-ratelimit-remaining')).toBe('0')
      const over = await gw.request('/v1/batches', key)
      expect(over.status).toBe(429)
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(((await over.json()) as { error: Record<string, unknown> }).error.code).toBe(
        'rate_limit_exceeded',
      )
    })

    test('the admin API: token required, credits, account view', async () => {
      expect(
        (
          await fetch(`${gw.url}/admin/v1/accounts/x`, {
            headers: { authorization: 'Bearer wrong' },
          })
        ).status,
      ).toBe(401)
      const { accountId } = await gw.newAccount('10.5')
      const credited = await gw.admin(`/accounts/${accountId}/credits`, {
        body: { amount_usd: '0.25' },
      })
      expect(await credited.json()).toMatchObject({
        id: accountId,
        balance_usd: '10.750000',
        available_usd: '10.750000',
        max_open_batches: 10,
      })
      const bad = await gw.admin(`/accounts/${accountId}/credits`, { body: { amount_usd: 12 } })
      expect(bad.status).toBe(400)
      expect((await gw.admin('/accounts/acct_missing')).status).toBe(404)
      // Refusals speak of the body, not of a batch line; broken JSON is said to be that.
      const raw = (body: string) =>
        fetch(`${gw.url}/admin/v1/accounts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body,
        }).then(async (r) => [
          r.status,
          ((await r.json()) as { error: { message: string } }).error.message,
        ])
      const [arrayStatus, array] = await raw('[]')
      expect(arrayStatus).toBe(400)
      expect(array).toContain('the body')
      expect(array).not.toContain('the line')
      expect(await raw('{"name":')).toEqual([
        400,
        'the body is not valid JSON; send one JSON object with the fields the endpoint takes',
      ])
      // A scope named twice is kept once.
      const made = await gw.admin(`/accounts/${accountId}/keys`, {
        body: { scopes: ['read', 'read'] },
      })
      expect(((await made.json()) as { scopes: string[] }).scopes).toEqual(['read'])
    })

    test("PATCH changes an account's open-batch and per-minute limits, and they hold from then on", async () => {
      const { accountId, key } = await gw.newAccount('10')
      const patched = await gw.admin(`/accounts/${accountId}`, {
        method: 'PATCH',
        body: { max_open_batches: 1, rate_limit_per_minute: 5 },
      })
      expect(patched.status).toBe(200)
      expect(await patched.json()).toMatchObject({ max_open_batches: 1, rate_limit_per_minute: 5 })
      const submit = () =>
        gw.request('/v1/batches', key, { method: 'POST', body: jsonl([chatLine('a')]) })
      expect((await submit()).status).toBe(201)
      const over = await submit()
      expect(over.status).toBe(429)
      expect(((await over.json()) as { error: { limit: unknown } }).error.limit).toEqual({
        open_batches: 1,
        in_use: 1,
      })
      // A value the store cannot hold, or not a number, is refused naming the field.
      for (const bad of [0, 'ten', 2 ** 31]) {
        const refused = await gw.admin(`/accounts/${accountId}`, {
          method: 'PATCH',
          body: { max_open_batches: bad },
        })
        expect([bad, refused.status]).toEqual([bad, 400])
      }
      expect(
        (
          await gw.admin('/accounts/acct_missing', {
            method: 'PATCH',
            body: { max_open_batches: 2 },
          })
        ).status,
      ).toBe(404)
    })

    test("the admin API lists accounts newest first, a page at a time, and an account's keys without their secrets", async () => {
      type Page = { data: { id: string; name: string }[]; has_more: boolean; last_id: string }
      const list = async (query: string) =>
        (await (await gw.admin(`/accounts${query}`)).json()) as Page
      const made: string[] = []
      for (let i = 0; i < 3; i++) made.push((await gw.newAccount('1')).accountId)
      const first = await list('?limit=2')
      // Other tests' accounts are older: the three just made come first, newest first.
      expect(first.data.map((a) => a.id)).toEqual([made[2]!, made[1]!])
      expect(first.has_more).toBe(true)
      expect(first.data[0]).toMatchObject({ object: 'account', balance_usd: '1.000000' })
      const second = await list(`?limit=2&after=${first.last_id}`)
      expect(second.data[0]!.id).toBe(made[0]!)
      // Every account exactly once across all pages.
      const seen: string[] = []
      for (let after = '', i = 0; i < 100; i++) {
        const page = await list(`?limit=1${after}`)
        seen.push(...page.data.map((a) => a.id))
        if (!page.has_more) break
        after = `&after=${page.last_id}`
      }
      expect(new Set(seen).size).toBe(seen.length)
      expect(seen).toEqual(expect.arrayContaining(made))
      expect((await gw.admin('/accounts?limit=0')).status).toBe(400)
      expect((await gw.admin('/accounts?limit=101')).status).toBe(400)

      const accountId = made[0]!
      const key = (await (
        await gw.admin(`/accounts/${accountId}/keys`, { body: { name: 'ci', scopes: ['read'] } })
      ).json()) as { id: string; key: string }
      expect((await gw.admin(`/keys/${key.id}`, { method: 'DELETE' })).status).toBe(200)
      const keys = await gw.admin(`/accounts/${accountId}/keys`)
      expect(keys.status).toBe(200)
      const text = await keys.text()
      // The secret is shown once, when made, and never again.
      expect(text).not.toContain(key.key)
      const { data } = JSON.parse(text) as { data: Record<string, unknown>[] }
      expect(data[0]).toMatchObject({ id: key.id, name: 'ci', scopes: ['read'] })
      expect(data[0]!.revoked_at).toBeNumber()
      // newAccount made a key too: the newest comes first.
      expect(data).toHaveLength(2)
      expect(data[1]!.revoked_at).toBeNull()
      expect((await gw.admin('/accounts/acct_missing/keys')).status).toBe(404)
    })
  })
}
