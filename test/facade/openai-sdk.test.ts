/**
 * The OpenAI facade, driven only by the official `openai` package: every answer must also
 * validate against OpenAI's published schemas.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI, { toFile } from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  chatLine,
  embedLine,
  jsonl,
  startTestGateway,
  STORES,
  type TestGateway,
} from '../helpers/gateway.ts'
import { contractProblems, schemaFor } from '../helpers/openai-contract.ts'
import { waitFor } from '../helpers/wait.ts'
import { ageCreate } from '../helpers/age-create.ts'

const FINAL = ['completed', 'failed', 'cancelled', 'expired']

/** The SDK's lazy APIPromise runs only when awaited: await it and return what it threw. */
const failure = (promise: PromiseLike<unknown>) =>
  Promise.resolve(promise).then(
    () => null,
    (error: unknown) => error,
  )

for (const storeKind of STORES) {
  describe(`OpenAI SDK against the facade (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    const contractFailures: string[] = []

    /** The SDK with a fetch that checks every facade answer against the contract. */
    function client(apiKey: string, options: { maxRetries?: number; fetch?: typeof fetch } = {}) {
      const inner = options.fetch ?? fetch
      const checkingFetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
        const response = await inner(input, init)
        const url = new URL(
          typeof input === 'string' || input instanceof URL ? input.toString() : input.url,
        )
        const name = schemaFor(init?.method ?? 'GET', url.pathname, response.status)
        if (
          name &&
          url.pathname.startsWith('/openai/v1/') &&
          (response.headers.get('content-type') ?? '').includes('json')
        ) {
          const body = await response.clone().json()
          contractFailures.push(
            ...contractProblems(name, body).map(
              (p) => `${init?.method ?? 'GET'} ${url.pathname}: ${p}`,
            ),
          )
        }
        return response
      }) as typeof fetch
      return new OpenAI({
        apiKey,
        baseURL: `${gw.url}/openai/v1`,
        maxRetries: options.maxRetries ?? 2,
        timeout: 20_000,
        fetch: checkingFetch,
      })
    }

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 5 })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      expect(contractFailures).toEqual([])
      await gw.stop()
      await sim.stop()
    })

    async function upload(openai: OpenAI, lines: unknown[], name = 'requests.jsonl') {
      return openai.files.create({
        file: await toFile(Buffer.from(jsonl(lines)), name),
        purpose: 'batch',
      })
    }
    const poll = (openai: OpenAI, id: string) =>
      waitFor(
        `batch ${id}`,
        async () => {
          const batch = await openai.batches.retrieve(id)
          return FINAL.includes(batch.status) ? batch : null
        },
        30_000,
        100,
      )

    test('upload, create, poll to completed, download output and error files matched by custom_id', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const lines = Array.from({ length: 10 }, (_, i) =>
        chatLine(
          `req-${i}`,
          `question ${i}`,
          {},
          i === 3 || i === 7 ? 'sim/refused' : 'gpt-4o-sim',
        ),
      ).map((line) => ({
        ...line,
        body: {
          ...line.body,
          model: line.body.model === 'gpt-4o-sim' ? 'chat-small' : line.body.model,
        },
      }))
      const file = await upload(openai, lines)
      expect(file).toMatchObject({
        object: 'file',
        purpose: 'batch',
        filename: 'requests.jsonl',
        bytes: jsonl(lines).length,
        status: 'processed',
      })
      expect((await openai.files.retrieve(file.id)).id).toBe(file.id)
      expect(await (await openai.files.content(file.id)).text()).toBe(jsonl(lines))

      const created = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
        metadata: { team: 'triage' },
      })
      expect(created).toMatchObject({
        object: 'batch',
        status: 'in_progress',
        completion_window: '24h',
        input_file_id: file.id,
        metadata: { team: 'triage' },
      })
      expect(created.expires_at! - created.created_at).toBe(24 * 3600)
      const batch = await poll(openai, created.id)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toEqual({ total: 10, completed: 8, failed: 2 })
      expect(batch.completed_at).toBeNumber()
      expect(batch.finalizing_at).toBeNumber()

      const output = (await (await openai.files.content(batch.output_file_id!)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(output).toHaveLength(8)
      const byId = new Map(lines.map((line) => [line.custom_id, line]))
      for (const row of output) {
        expect(byId.has(row.custom_id)).toBe(true)
        expect(row.id).toMatch(/^batch_req_/)
        expect(row.error).toBeNull()
        expect(row.response.status_code).toBe(200)
        expect(row.response.request_id).toBeString()
        expect(row.response.body.object).toBe('chat.completion')
        expect(row.response.body.usage.prompt_tokens).toBeGreaterThan(0)
      }
      const errors = (await (await openai.files.content(batch.error_file_id!)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(errors.map((e) => e.custom_id).sort()).toEqual(['req-3', 'req-7'])
      for (const row of errors) {
        expect(row.error.code).toBe('invalid_request')
        expect(row.response.status_code).toBe(400)
      }
      const outputFile = await openai.files.retrieve(batch.output_file_id!)
      expect(outputFile).toMatchObject({ purpose: 'batch_output', object: 'file' })
      expect(outputFile.bytes).toBe(output.map((o) => JSON.stringify(o)).join('\n').length + 1)
      // The output files are the account's files.
      const listed = []
      for await (const f of openai.files.list()) listed.push(f.id)
      expect(listed).toEqual(
        expect.arrayContaining([file.id, batch.output_file_id, batch.error_file_id]),
      )
      // …and the batch is a native batch too.
      const native = (await (await gw.request(`/v1/batches/${batch.id}`, key)).json()) as {
        status: string
        line_count: number
      }
      expect(native).toMatchObject({ status: 'completed', line_count: 10 })
      const deleted = await openai.files.delete(file.id)
      expect(deleted).toMatchObject({ id: file.id, deleted: true })
      expect(await failure(openai.files.retrieve(file.id))).toBeInstanceOf(OpenAI.NotFoundError)
    })

    test('an embeddings batch', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [
        embedLine('e-1', 'first'),
        embedLine('e-2', ['second', 'third']),
      ])
      const batch = await poll(
        openai,
        (
          await openai.batches.create({
            input_file_id: file.id,
            endpoint: '/v1/embeddings',
            completion_window: '24h',
          })
        ).id,
      )
      expect(batch.request_counts).toEqual({ total: 2, completed: 2, failed: 0 })
      const output = (await (await openai.files.content(batch.output_file_id!)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(output.find((o) => o.custom_id === 'e-2').response.body.data).toHaveLength(2)
    })

    test('cancel, on either surface', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      sim.configure({ latencyMs: 400 })
      try {
        const file = await upload(
          openai,
          Array.from({ length: 200 }, (_, i) => chatLine(`c-${i}`, `slow ${i}`)),
        )
        const batch = await openai.batches.create({
          input_file_id: file.id,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        })
        const cancelling = await openai.batches.cancel(batch.id)
        expect(['cancelling', 'cancelled']).toContain(cancelling.status)
        expect(cancelling.cancelling_at).toBeNumber()
        const done = await poll(openai, batch.id)
        expect(done.status).toBe('cancelled')
        expect(done.cancelled_at).toBeNumber()
        expect(done.request_counts!.completed + done.request_counts!.failed).toBe(200)
        const errors = (await (await openai.files.content(done.error_file_id!)).text())
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l))
        expect(errors.every((e) => e.error.code === 'batch_cancelled' && e.response === null)).toBe(
          true,
        )

        const other = await openai.batches.create({
          input_file_id: file.id,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        })
        expect(
          (await gw.request(`/v1/batches/${other.id}`, key, { method: 'DELETE' })).status,
        ).toBe(200)
        expect((await poll(openai, other.id)).status).toBe('cancelled')
        expect(await failure(openai.batches.cancel(other.id))).toBeInstanceOf(OpenAI.ConflictError)
      } finally {
        sim.configure({ latencyMs: 5 })
      }
    })

    test('a native batch is a facade batch too: its output and error files download', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const submitted = await gw.request('/v1/batches', key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body: jsonl([chatLine('ok'), chatLine('refused', 'x', {}, 'sim/refused')]),
      })
      expect(submitted.status).toBe(201)
      const { id } = (await submitted.json()) as { id: string }
      const done = await poll(openai, id)
      expect(done.request_counts).toMatchObject({ total: 2, completed: 1, failed: 1 })
      const lines = async (fileId: string) =>
        (await (await openai.files.content(fileId)).text())
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as { custom_id: string })
      expect((await lines(done.output_file_id!)).map((line) => line.custom_id)).toEqual(['ok'])
      expect((await lines(done.error_file_id!)).map((line) => line.custom_id)).toEqual(['refused'])
      const listed = await openai.files.list({ purpose: 'batch_output' })
      expect(listed.data.map((file) => file.id).sort()).toEqual(
        [done.output_file_id!, done.error_file_id!].sort(),
      )
      // A batch's output is no input: a 400 that says which file to send, not a 404.
      const refused = await failure(
        openai.batches.create({
          input_file_id: done.output_file_id!,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        }),
      )
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
      expect((refused as InstanceType<typeof OpenAI.BadRequestError>).message).toContain(
        'purpose "batch"',
      )
    })

    test('list with after/limit paging', async () => {
      const { key } = await gw.newAccount('1', {}, { max_open_batches: 20 })
      const openai = client(key)
      const file = await upload(openai, [chatLine('a')])
      const ids: string[] = []
      for (let i = 0; i < 5; i++)
        ids.push(
          (
            await openai.batches.create({
              input_file_id: file.id,
              endpoint: '/v1/chat/completions',
              completion_window: '24h',
              metadata: { n: String(i) },
            })
          ).id,
        )
      const page = await openai.batches.list({ limit: 2 })
      expect(page.data.map((b) => b.id)).toEqual([ids[4], ids[3]])
      expect(page.has_more).toBe(true)
      const next = await openai.batches.list({ limit: 2, after: ids[3] })
      expect(next.data.map((b) => b.id)).toEqual([ids[2], ids[1]])
      const all: string[] = []
      for await (const batch of openai.batches.list({ limit: 2 })) all.push(batch.id)
      expect(all).toEqual([...ids].reverse())
    })

    test('a batch that ran and whose every request failed is completed, as OpenAI has it, its answers in the error file', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [
        chatLine('r-1', 'one', {}, 'sim/refused'),
        chatLine('r-2', 'two', {}, 'sim/refused'),
      ])
      const created = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      const batch = await poll(openai, created.id)
      expect(batch).toMatchObject({
        status: 'completed',
        errors: null,
        failed_at: null,
        output_file_id: null,
        request_counts: { total: 2, completed: 0, failed: 2 },
      })
      expect(batch.completed_at).toBeNumber()
      const errors = (await (await openai.files.content(batch.error_file_id!)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { custom_id: string; response: { status_code: number } })
      expect(errors.map((e) => [e.custom_id, e.response.status_code])).toEqual([
        ['r-1', 400],
        ['r-2', 400],
      ])
      // Its cancel's refusal names the same status.
      const refused = await failure(openai.batches.cancel(batch.id))
      expect(refused).toBeInstanceOf(OpenAI.ConflictError)
      expect((refused as { error: { message: string } }).error.message).toContain(
        'is completed and can no longer be cancelled',
      )
      // The native API says it in its own terms: not one line succeeded.
      const native = (await (await gw.request(`/v1/batches/${batch.id}`, key)).json()) as {
        status: string
      }
      expect(native.status).toBe('failed')
    })

    test('a file with problems makes a failed batch with line-numbered errors', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [
        chatLine('ok'),
        chatLine('bad', 'x', { n: 12 }),
        '{not json',
        chatLine('ok'),
      ])
      const batch = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      expect(batch.status).toBe('failed')
      expect(batch.failed_at).toBeNumber()
      expect(batch.errors!.object).toBe('list')
      expect(batch.errors!.data!.map((e) => [e.line, e.param])).toEqual([
        [2, 'body.n'],
        [3, null],
        [4, 'custom_id'],
      ])
      expect(batch.errors!.data![0].message).toContain('at most 8')
      // A failed batch holds nothing and counts against no limit.
      expect(await (await gw.admin(`/accounts/${accountId}`)).json()).toMatchObject({
        held_usd: '0.000000',
        open_batches: 0,
      })
    })

    test('past 25 problems, the last error says how many more there are', async () => {
      const openai = client((await gw.newAccount('1')).key)
      const lines = Array.from({ length: 30 }, (_, i) => chatLine(`bad-${i}`, 'x', { n: 12 }))
      const file = await upload(openai, lines)
      const batch = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      expect(batch.status).toBe('failed')
      const errors = batch.errors!.data!
      expect(errors.length).toBe(26)
      expect(errors.slice(0, 25).map((e) => e.line)).toEqual(
        Array.from({ length: 25 }, (_, i) => i + 1),
      )
      expect(errors[25]).toMatchObject({ code: 'more_errors', line: null, param: null })
      expect(errors[25].message).toStartWith('5 more problems are not listed')
      expect(contractProblems('Batch', batch)).toEqual([])
    })

    test('a "72h" window through extra_body', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [chatLine('a')])
      const batch = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
        // @ts-expect-error extra_body is merged into the JSON body by the SDK
        extra_body: { completion_window: '72h' },
      })
      expect(batch.completion_window).toBe('72h')
      expect(batch.expires_at! - batch.created_at).toBe(72 * 3600)
      expect(
        await failure(
          openai.batches.create({
            input_file_id: file.id,
            endpoint: '/v1/chat/completions',
            completion_window: '169h' as '24h',
          }),
        ),
      ).toBeInstanceOf(OpenAI.BadRequestError)
    })

    test('a window other than "Nh" in plain decimal digits, 1 to 168, is refused with what to send', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key, { maxRetries: 0 })
      const file = await upload(openai, [chatLine('a')])
      for (const window of ['0x10h', '1e2h', ' 24h', '24 h', '024h', '+24h', '24', '169h', '0h']) {
        for (const body of [
          {
            input_file_id: file.id,
            endpoint: '/v1/chat/completions' as const,
            completion_window: window as '24h',
          },
          // The same rule through extra_body.
          {
            input_file_id: file.id,
            endpoint: '/v1/chat/completions' as const,
            completion_window: '24h' as const,
            extra_body: { completion_window: window },
          },
        ]) {
          const error = await failure(openai.batches.create(body))
          expect(error).toBeInstanceOf(OpenAI.BadRequestError)
          const refused = error as InstanceType<typeof OpenAI.BadRequestError>
          expect(refused.param).toBe('completion_window')
          expect(refused.message).toContain(
            `completion_window must be "24h" or another "Nh" with N a whole number from 1 to 168; got ${JSON.stringify(window)}; set completion_window to`,
          )
        }
      }
      expect((await openai.batches.list()).data).toHaveLength(0)
    })

    test('a create retried by the SDK after a timeout returns the batch the first attempt made', async () => {
      const { key } = await gw.newAccount('1')
      // The first create reaches the gateway but its answer is lost, as on a timed-out connection.
      const lossy = lossyCreate()
      const openai = client(key, { fetch: lossy.fetch })
      const file = await upload(openai, [chatLine('a')])
      const batch = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      expect(lossy.dropped()).toBe(true)
      const all = await openai.batches.list()
      expect(all.data.map((b) => b.id)).toEqual([batch.id])
      // A deliberate second create of the same file is a new batch.
      const again = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      expect(again.id).not.toBe(batch.id)
    })

    test('a retry gets the batch its own first attempt made, not an earlier deliberate create of the same body', async () => {
      const { key } = await gw.newAccount('1')
      const file = await upload(client(key), [chatLine('a')])
      const body = {
        input_file_id: file.id,
        endpoint: '/v1/chat/completions' as const,
        completion_window: '24h' as const,
      }
      const first = await client(key).batches.create(body)
      // The second create reaches the gateway but its answer is lost; the SDK retries it.
      const lossy = lossyCreate()
      const second = await client(key, { fetch: lossy.fetch }).batches.create(body)
      expect(lossy.dropped()).toBe(true)
      expect(second.id).not.toBe(first.id)
      // Two batches, both known to the caller: none made behind its back.
      const all = await client(key).batches.list()
      expect(all.data.map((b) => b.id).sort()).toEqual([first.id, second.id].sort())
    })

    test('a retry finds a create of the last half hour or so, never an older batch of the same body', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [chatLine('a')])
      const body = JSON.stringify({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      const create = async (headers: Record<string, string> = {}) => {
        const response = await gw.request('/openai/v1/batches', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
        })
        expect(response.status).toBe(200)
        return ((await response.json()) as { id: string }).id
      }
      const retry = { 'x-stainless-retry-count': '1' }
      const first = await create()
      // Made 30 to 40 minutes ago: within the SDKs' retries (a 10-minute timeout, twice).
      await ageCreate(gw, first, 3)
      expect(await create(retry)).toBe(first)
      // 50 minutes ago and more: no retry of today's, so a batch of its own.
      await ageCreate(gw, first, 2)
      const later = await create(retry)
      expect(later).not.toBe(first)
      // Which its own retries find.
      expect(await create(retry)).toBe(later)
    })

    test('a file keeps its name as sent, beyond ASCII too', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const name = 'é rapport 日本.jsonl'
      const file = await upload(openai, [chatLine('a')], name)
      expect(file.filename).toBe(name)
      expect((await openai.files.retrieve(file.id)).filename).toBe(name)
    })

    test('a create that failed validation, retried or repeated with its key, is the same failed batch', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [{ custom_id: 'a', method: 'POST' }])
      const create = async (headers: Record<string, string>) => {
        const response = await gw.request('/openai/v1/batches', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({
            input_file_id: file.id,
            endpoint: '/v1/chat/completions',
            completion_window: '24h',
          }),
        })
        const batch = (await response.json()) as { id: string; status: string }
        expect(batch.status).toBe('failed')
        return batch.id
      }
      const first = await create({})
      expect(await create({ 'x-stainless-retry-count': '1' })).toBe(first)
      const keyed = await create({ 'idempotency-key': 'k-1' })
      expect(keyed).not.toBe(first)
      expect(await create({ 'idempotency-key': 'k-1' })).toBe(keyed)
      expect((await openai.batches.list()).data).toHaveLength(2)
      // The failed batch's key with another create body (its window): refused, naming it.
      const other = await gw.request('/openai/v1/batches', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1' },
        body: JSON.stringify({
          input_file_id: file.id,
          endpoint: '/v1/chat/completions',
          completion_window: '48h',
        }),
      })
      expect(other.status).toBe(422)
      expect(((await other.json()) as { error: Record<string, unknown> }).error).toMatchObject({
        code: 'idempotency_key_reused',
        batch_id: keyed,
      })
      expect((await openai.batches.list()).data).toHaveLength(2)
    })

    test('a create field the facade does not take is a 400 naming it, nothing made; output_expires_after says why', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [chatLine('a')])
      const body = {
        input_file_id: file.id,
        endpoint: '/v1/chat/completions' as const,
        completion_window: '24h' as const,
      }
      const refused = await badRequest(
        openai.batches.create({ ...body, max_cost_usdd: '1' } as never),
      )
      expect(refused.param).toBe('max_cost_usdd')
      expect(refused.message).toStartWith('unknown field max_cost_usdd; did you mean max_cost_usd?')
      const why = await badRequest(
        openai.batches.create({
          ...body,
          output_expires_after: { anchor: 'created_at', seconds: 3600 },
        }),
      )
      expect(why.param).toBe('output_expires_after')
      expect(why.message).toContain('output_expires_after is not supported')
      expect((await openai.batches.list()).data).toHaveLength(0)
      // Through extra_body, the gateway's own fields are taken.
      const capped = await openai.batches.create({ ...body, max_cost_usd: '1' } as never)
      const native = await gw.request(`/v1/batches/${capped.id}`, key)
      expect(((await native.json()) as { max_cost_usd: string }).max_cost_usd).toBe('1')
    })

    test("metadata past OpenAI's limits is a 400 saying which, in plain words", async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const file = await upload(openai, [chatLine('a')])
      const refusal = (metadata: Record<string, string>) =>
        badRequest(
          openai.batches.create({
            input_file_id: file.id,
            endpoint: '/v1/chat/completions',
            completion_window: '24h',
            metadata,
          }),
        )
      const long = 'k'.repeat(65)
      expect((await refusal({ [long]: 'v' })).message).toContain(
        'is a key of more than 64 characters; shorten the key',
      )
      expect((await refusal({ team: 'v'.repeat(513) })).message).toStartWith(
        'metadata.team must be at most 512 characters',
      )
      const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']))
      expect((await refusal(many)).message).toContain('may have at most 16 keys')
      expect((await openai.batches.list()).data).toHaveLength(0)
    })

    test('batches.create with an idempotency key made another batch with another file is a 422 the SDK raises, naming that batch', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const files = [await upload(openai, [chatLine('a')]), await upload(openai, [chatLine('b')])]
      const create = (file: { id: string }) =>
        openai.batches.create(
          { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' },
          { headers: { 'idempotency-key': 'k-files' } },
        )
      const first = await create(files[0])
      expect((await create(files[0])).id).toBe(first.id)
      const reused = await failure(create(files[1]))
      expect(reused).toBeInstanceOf(OpenAI.UnprocessableEntityError)
      expect((reused as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({
        code: 'idempotency_key_reused',
        batch_id: first.id,
      })
      expect((await openai.batches.list()).data.map((batch) => batch.id)).toEqual([first.id])
    })

    test('typed errors: AuthenticationError, PermissionDeniedError, NotFoundError, RateLimitError, BadRequestError', async () => {
      const owner = await gw.newAccount('1')
      const file = await upload(client(owner.key), [chatLine('a')])
      const batch = await client(owner.key).batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      expect(await failure(client('mg_wrong').batches.list())).toBeInstanceOf(
        OpenAI.AuthenticationError,
      )
      const readOnly = (await (
        await gw.admin(`/accounts/${owner.accountId}/keys`, { body: { scopes: ['read'] } })
      ).json()) as { key: string }
      expect(await failure(client(readOnly.key).batches.cancel(batch.id))).toBeInstanceOf(
        OpenAI.PermissionDeniedError,
      )
      const stranger = await gw.newAccount('1')
      expect(await failure(client(stranger.key).batches.retrieve(batch.id))).toBeInstanceOf(
        OpenAI.NotFoundError,
      )
      expect(await failure(client(stranger.key).files.content(file.id))).toBeInstanceOf(
        OpenAI.NotFoundError,
      )
      expect(
        await failure(
          client(stranger.key).batches.create({
            input_file_id: file.id,
            endpoint: '/v1/chat/completions',
            completion_window: '24h',
          }),
        ),
      ).toBeInstanceOf(OpenAI.NotFoundError)
      const slow = await gw.newAccount('1', { rate_limit_per_minute: 1 })
      await client(slow.key).batches.list()
      expect(await failure(client(slow.key, { maxRetries: 0 }).batches.list())).toBeInstanceOf(
        OpenAI.RateLimitError,
      )
      expect(
        await failure(
          client(owner.key).batches.create({
            input_file_id: file.id,
            endpoint: '/v1/completions' as '/v1/chat/completions',
            completion_window: '24h',
          }),
        ),
      ).toBeInstanceOf(OpenAI.BadRequestError)
      expect(
        await failure(
          client(owner.key).files.create({
            file: await toFile(Buffer.from('{}'), 'x.jsonl'),
            purpose: 'fine-tune',
          }),
        ),
      ).toBeInstanceOf(OpenAI.BadRequestError)
    })

    test('live chat (also streaming), embeddings and models with bare aliases', async () => {
      const { key } = await gw.newAccount('1')
      const openai = client(key)
      const completion = await openai.chat.completions.create({
        model: 'chat-small',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 10,
      })
      expect(completion.object).toBe('chat.completion')
      expect(completion.usage!.prompt_tokens).toBeGreaterThan(0)
      const stream = await openai.chat.completions.create({
        model: 'sim/chat',
        messages: [{ role: 'user', content: 'stream' }],
        max_tokens: 10,
        stream: true,
      })
      let text = ''
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
      expect(text.length).toBeGreaterThan(0)
      const embedding = await openai.embeddings.create({ model: 'sim/embed', input: ['a', 'b'] })
      expect(embedding.data).toHaveLength(2)
      const models = []
      for await (const model of openai.models.list()) models.push(model.id)
      expect(models).toContain('sim/chat')
    })
  })
}

/**
 * A fetch whose first batch create reaches the gateway but whose answer is lost, as on a
 * timed-out connection: the SDK retries it.
 */
function lossyCreate() {
  let dropped = false
  const lossy = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const response = await fetch(input, init)
    if (!dropped && init?.method === 'POST' && String(input).endsWith('/batches')) {
      dropped = true
      throw new TypeError('fetch failed: connection reset')
    }
    return response
  }) as typeof fetch
  return { fetch: lossy, dropped: () => dropped }
}

/** The error body of a call the SDK must raise as a 400 (BadRequestError). */
async function badRequest(call: Promise<unknown>): Promise<{ message: string; param: string }> {
  const error = await call.then(
    () => null,
    (caught: unknown) => caught,
  )
  expect(error).toBeInstanceOf(OpenAI.BadRequestError)
  return (error as InstanceType<typeof OpenAI.BadRequestError>).error as {
    message: string
    param: string
  }
}
