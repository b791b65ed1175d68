/**
 * Uploads to /openai/v1/files leave nothing behind, and count against the account's file quotas
 * (docs/money-and-limits.md): cut short, malformed, killed mid-stream, refused over a limit, racing each other.
 * The content store is read directly (the data dir's `files/`, or PostgreSQL's file_chunks) to
 * check that nothing is left.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI, { toFile } from 'openai'
import postgres from 'postgres'
import { splitSchema } from '../../src/store/open-store.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import {
  ADMIN_TOKEN,
  chatLine,
  dropTestSchema,
  freshSchemaUrl,
  jsonl,
  startTestGateway,
  STORES,
  TEST_DATABASE_URL,
  type TestGateway,
} from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

const BOUNDARY = '----multigrid-test-boundary'
const PART_HEAD =
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`
const PART_TAIL = `\r\n--${BOUNDARY}--\r\n`

/** The ids of content in the blob store: files (whole or `.partial`) on disk, or chunked in PostgreSQL. */
async function storedContent(env: Record<string, string>): Promise<string[]> {
  if (!env.DATABASE_URL) {
    const dir = join(env.MULTIGRID_DATA_DIR!, 'files')
    return existsSync(dir) ? readdirSync(dir).sort() : []
  }
  const { url, schema } = splitSchema(env.DATABASE_URL)
  const sql = postgres(url, { max: 1, onnotice: () => {}, connection: { search_path: schema! } })
  try {
    return (await sql`SELECT DISTINCT file_id FROM file_chunks ORDER BY file_id`).map(
      (row) => row.file_id as string,
    )
  } finally {
    await sql.end()
  }
}

/**
 * Starts a multipart upload over a raw socket that declares `declared` bytes and sends the head
 * of the file plus `bytes` of content, then waits; the caller hangs up (destroy) when it likes.
 */
function startUpload(port: number, key: string, bytes: number, declared = 50_000_000): Socket {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  socket.write(
    `POST /openai/v1/files HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: ${declared}\r\n\r\n` +
      PART_HEAD,
  )
  const line = JSON.stringify(chatLine('x', 'y'.repeat(900))) + '\n'
  const chunk = Buffer.from(line.repeat(Math.ceil(65_536 / line.length)))
  for (let sent = 0; sent < bytes; sent += chunk.length) socket.write(chunk)
  return socket
}

async function accountView(admin: TestGateway['admin'], id: string) {
  return (await (await admin(`/accounts/${id}`)).json()) as Record<string, unknown>
}

const failure = (promise: PromiseLike<unknown>) =>
  Promise.resolve(promise).then(
    () => null,
    (error: unknown) => error,
  )

for (const storeKind of STORES) {
  describe(`uploads leave nothing behind (${storeKind})`, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
    })
    afterAll(async () => {
      await gw.stop()
    })
    /** A multipart body, written out, posted to files.create's route. */
    const upload = (key: string, body: string) =>
      gw.request('/openai/v1/files', key, {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
        body,
      })

    test('an upload the client hangs up on leaves no content, no record and no reservation', async () => {
      const { key, accountId } = await gw.newAccount('1')
      // 3 MiB: past the PostgreSQL store's first 1 MiB chunk, so there is content to leave behind.
      const socket = startUpload(gw.port, key, 3 << 20)
      await waitFor(
        'content being written',
        async () => (await storedContent(gw.env)).length > 0,
        10_000,
        20,
      )
      socket.destroy()
      await waitFor(
        'content deleted',
        async () => (await storedContent(gw.env)).length === 0,
        10_000,
        20,
      )
      const list = (await (await gw.request('/openai/v1/files', key)).json()) as { data: unknown[] }
      expect(list.data).toEqual([])
      await waitFor(
        'reservation released',
        async () => (await accountView(gw.admin, accountId)).files_in_use === 0,
        5_000,
        20,
      )
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        files_in_use: 0,
        stored_bytes: 0,
      })
    })

    test('a malformed multipart body (no closing boundary) is a 400 that leaves nothing', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const response = await upload(key, PART_HEAD + jsonl([chatLine('a'), chatLine('b')]))
      expect(response.status).toBe(400)
      const error = ((await response.json()) as { error: { message: string; param: string } }).error
      expect(error.message).toContain('malformed multipart body')
      expect(error.param).toBe('file')
      expect(await storedContent(gw.env)).toEqual([])
      expect(
        ((await (await gw.request('/openai/v1/files', key)).json()) as { data: unknown[] }).data,
      ).toEqual([])
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        files_in_use: 0,
        stored_bytes: 0,
      })
    })

    test('two file parts, or a file part sent as a text field, are 400s that say so and leave nothing', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const content = jsonl([chatLine('a')])
      const send = (body: string) => upload(key, body)
      const second = `\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="b.jsonl"\r\n\r\n${content}`
      const twice = await send(PART_HEAD + content + second + PART_TAIL)
      expect(twice.status).toBe(400)
      expect(((await twice.json()) as { error: { message: string } }).error.message).toBe(
        'the upload has more than one file part; send one file per upload',
      )
      const noName = PART_HEAD.replace('; filename="big.jsonl"', '')
      const field = await send(noName + content + PART_TAIL)
      expect(field.status).toBe(400)
      expect(((await field.json()) as { error: { message: string } }).error.message).toStartWith(
        'the "file" part has no filename, so it is a text field, not a file;',
      )
      expect(await storedContent(gw.env)).toEqual([])
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        files_in_use: 0,
        stored_bytes: 0,
      })
    })

    test('a wrong purpose leaves nothing either; a good upload keeps exactly its content', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const content = jsonl([chatLine('a')])
      const send = (purpose: string) =>
        upload(
          key,
          PART_HEAD.replace('\r\n\r\nbatch\r\n', `\r\n\r\n${purpose}\r\n`) + content + PART_TAIL,
        )
      expect((await send('fine-tune')).status).toBe(400)
      expect(await storedContent(gw.env)).toEqual([])
      const good = await send('batch')
      expect(good.status).toBe(200)
      const { id } = (await good.json()) as { id: string }
      expect(await storedContent(gw.env)).toEqual([id])
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        files_in_use: 1,
        stored_bytes: Buffer.byteLength(content),
      })
      expect((await gw.request(`/openai/v1/files/${id}`, key, { method: 'DELETE' })).status).toBe(
        200,
      )
      expect(await storedContent(gw.env)).toEqual([])
    })

    test("files.create's expires_after: expires_at is set, a bad one is a 400 that leaves nothing, and the janitor deletes the file once it expired", async () => {
      const { key } = await gw.newAccount('1')
      const client = new OpenAI({ baseURL: `${gw.url}/openai/v1`, apiKey: key, maxRetries: 0 })
      const content = () => toFile(Buffer.from(jsonl([chatLine('a')])), 'expiring.jsonl')
      const created = await client.files.create({
        file: await content(),
        purpose: 'batch',
        expires_after: { anchor: 'created_at', seconds: 3600 },
      })
      expect(created.expires_at).toBe(created.created_at + 3600)
      expect((await client.files.retrieve(created.id)).expires_at).toBe(created.expires_at)
      const kept = await client.files.create({ file: await content(), purpose: 'batch' })
      expect(kept.expires_at).toBeNull()
      for (const seconds of [60, 2_592_001]) {
        const refused = await failure(
          client.files.create({
            file: await content(),
            purpose: 'batch',
            expires_after: { anchor: 'created_at', seconds },
          }),
        )
        expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
        expect((refused as { param: string }).param).toBe('expires_after.seconds')
      }
      expect((await storedContent(gw.env)).sort()).toEqual([created.id, kept.id].sort())
      // An hour on: gone for its account, its content deleted; the other is kept.
      await gw.janitor.runOnce(created.created_at + 3600)
      expect(await failure(client.files.retrieve(created.id))).toBeInstanceOf(OpenAI.NotFoundError)
      expect(await storedContent(gw.env)).toEqual([kept.id])
      await client.files.delete(kept.id)
    })
  })

  describe(`a killed upload is cleaned up after the restart (${storeKind})`, () => {
    test('content of an upload in flight at SIGKILL is deleted at start-up or by the janitor; a live upload is kept', async () => {
      const env: Record<string, string> = {
        PORT: String(freePort()),
        HOST: '127.0.0.1',
        MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-data-')),
        MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
        MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
        MULTIGRID_DISPATCH: '0',
        LOG_LEVEL: 'warn',
      }
      if (storeKind === 'postgres') env.DATABASE_URL = freshSchemaUrl(TEST_DATABASE_URL!).url
      const child = await spawnGatewayProcess(env)
      let gw: TestGateway | null = null
      try {
        const admin = (path: string, body?: unknown) =>
          fetch(`${child.url}/admin/v1${path}`, {
            method: body ? 'POST' : 'GET',
            headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
            body: body ? JSON.stringify(body) : undefined,
          })
        const { id: accountId } = (await (
          await admin('/accounts', { name: 'killed', credit_usd: '1' })
        ).json()) as { id: string }
        const { key } = (await (await admin(`/accounts/${accountId}/keys`, {})).json()) as {
          key: string
        }
        const socket = startUpload(Number(env.PORT), key, 3 << 20)
        await waitFor(
          'content being written',
          async () => (await storedContent(env)).length > 0,
          10_000,
          20,
        )
        await child.kill('SIGKILL')
        socket.destroy()
        const left = await storedContent(env)
        expect(left.length).toBe(1)
        if (storeKind === 'sqlite') expect(left[0]).toEndWith('.partial')

        // The same store again, in this process.
        gw = await startTestGateway({ env: { ...env, PORT: '0' } })
        if (storeKind === 'sqlite') {
          // No other process shares the embedded store: start-up clears it at once.
          await waitFor(
            'partial file deleted at start-up',
            async () => (await storedContent(env)).length === 0,
            10_000,
            20,
          )
        } else {
          // Another instance may still be receiving it, until its reservation stops being renewed.
          const now = Math.floor(Date.now() / 1000)
          expect(await gw.janitor.runOnce(now)).toMatchObject({
            abandonedUploads: [],
            orphanedContent: [],
          })
          expect(await storedContent(env)).toEqual(left)
          const report = await gw.janitor.runOnce(now + 600)
          expect(report.abandonedUploads).toEqual(left)
          expect(await storedContent(env)).toEqual([])
        }
        expect(await accountView(gw.admin, accountId)).toMatchObject({
          files_in_use: 0,
          stored_bytes: 0,
        })

        // An upload in progress now is not touched by the janitor, however far it runs.
        const live = startUpload(gw.port, key, 3 << 20)
        await waitFor('live content', async () => (await storedContent(env)).length > 0, 10_000, 20)
        const report = await gw.janitor.runOnce()
        expect(report).toMatchObject({ abandonedUploads: [], orphanedContent: [] })
        expect((await storedContent(env)).length).toBe(1)
        live.destroy()
        await waitFor(
          'live upload content deleted',
          async () => (await storedContent(env)).length === 0,
          10_000,
          20,
        )
      } finally {
        await child.kill('SIGKILL').catch(() => {})
        if (gw) await gw.stop()
        else if (env.DATABASE_URL) await dropTestSchema(env.DATABASE_URL)
      }
    }, 60_000)
  })
}

describe('content with no record is swept (sqlite)', () => {
  test('a stray .partial and a whole file nobody knows are deleted; recorded files are kept', async () => {
    const gw = await startTestGateway({ env: { MULTIGRID_DISPATCH: '0' } })
    try {
      const { key } = await gw.newAccount('1')
      const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
      const kept = await openai.files.create({
        file: await toFile(Buffer.from(jsonl([chatLine('a')])), 'a.jsonl'),
        purpose: 'batch',
      })
      const dir = join(gw.env.MULTIGRID_DATA_DIR, 'files')
      writeFileSync(join(dir, 'file-00000000000000000000000000000001.partial'), 'half a file')
      writeFileSync(
        join(dir, 'file-00000000000000000000000000000002'),
        'a file whose record is gone',
      )
      const report = await gw.janitor.runOnce()
      expect(report.orphanedContent.sort()).toEqual([
        'file-00000000000000000000000000000001',
        'file-00000000000000000000000000000002',
      ])
      expect(readdirSync(dir)).toEqual([kept.id])
      expect(await (await openai.files.content(kept.id)).text()).toBe(jsonl([chatLine('a')]))
    } finally {
      await gw.stop()
    }
  })
})

for (const storeKind of STORES) {
  describe(`per-account file quotas through the openai SDK (${storeKind})`, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
    })
    afterAll(async () => {
      await gw.stop()
    })

    const content = jsonl([chatLine('a', 'z'.repeat(900))])
    const size = Buffer.byteLength(content)
    const sdk = (key: string) =>
      new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0, timeout: 20_000 })
    const upload = async (openai: OpenAI) =>
      openai.files.create({ file: await toFile(Buffer.from(content), 'a.jsonl'), purpose: 'batch' })
    type Refusal = InstanceType<typeof OpenAI.RateLimitError> & {
      error: { limit: unknown; message: string }
    }

    test('the admin view shows the defaults (500 files, 20 GB) and what is in use', async () => {
      const { accountId } = await gw.newAccount('1')
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        max_files: 500,
        max_stored_bytes: 20_000_000_000,
        files_in_use: 0,
        stored_bytes: 0,
      })
    })

    test('past max_files, files.create is 429 limit_exceeded with error.limit {files, in_use}', async () => {
      const { key, accountId } = await gw.newAccount('1', {}, { max_files: 2 })
      const openai = sdk(key)
      const first = await upload(openai)
      await upload(openai)
      const refused = (await failure(upload(openai))) as Refusal
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError)
      expect(refused.code).toBe('limit_exceeded')
      expect(refused.error.limit).toEqual({ files: 2, in_use: 2 })
      expect(refused.error.message).toContain('the account already has 2 files, its limit of 2;')
      expect(refused.error.message).toContain('delete files')
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        max_files: 2,
        files_in_use: 2,
        stored_bytes: 2 * size,
      })
      await openai.files.delete(first.id)
      await upload(openai)
      // Raised by PATCH, the next upload fits.
      const patched = await gw.admin(`/accounts/${accountId}`, {
        method: 'PATCH',
        body: { max_files: 3 },
      })
      expect(patched.status).toBe(200)
      expect(await patched.json()).toMatchObject({ max_files: 3, files_in_use: 2 })
      await upload(openai)
      expect(await failure(upload(openai))).toBeInstanceOf(OpenAI.RateLimitError)
      // One file is one file.
      const single = await gw.newAccount('1', {}, { max_files: 1 })
      await upload(sdk(single.key))
      const one = (await failure(upload(sdk(single.key)))) as Refusal
      expect(one.error.message).toContain('the account already has 1 file, its limit of 1;')
    })

    test('past max_stored_bytes, files.create is 429 with error.limit {stored_bytes, in_use}; a declared size over it is refused before the body', async () => {
      const limit = Math.floor(2.5 * size)
      const { key, accountId } = await gw.newAccount('1', {}, { max_stored_bytes: limit })
      const openai = sdk(key)
      await upload(openai)
      await upload(openai)
      const refused = (await failure(upload(openai))) as Refusal
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError)
      expect(refused.code).toBe('limit_exceeded')
      expect(refused.error.limit).toEqual({ stored_bytes: limit, in_use: 2 * size })

      // 50 MB declared, nothing of the file sent: the answer comes at once.
      const socket = startUpload(gw.port, key, 0)
      const answer = await new Promise<string>((resolve) => {
        let text = ''
        socket.on('data', (data) => {
          text += data.toString()
          if (text.includes('\r\n\r\n{')) resolve(text)
        })
        setTimeout(() => resolve(text), 5_000)
      })
      socket.destroy()
      expect(answer).toStartWith('HTTP/1.1 429')
      expect(answer).toContain('"stored_bytes"')

      // A well-formed body of unknown length that grows past the limit as it streams. (Without
      // its closing boundary it is also malformed, and which of the two refusals comes first is
      // a race between the parser reaching the end and the store growing the reservation.)
      let pushed = 0
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pushed++ === 0) controller.enqueue(new TextEncoder().encode(PART_HEAD))
          else if (pushed < 200) controller.enqueue(new TextEncoder().encode(content))
          else {
            controller.enqueue(new TextEncoder().encode(PART_TAIL))
            controller.close()
          }
        },
      })
      const streamed = await gw.request('/openai/v1/files', key, {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
        body,
        duplex: 'half',
      } as RequestInit)
      expect(streamed.status).toBe(429)
      expect(((await streamed.json()) as { error: { limit: unknown } }).error.limit).toMatchObject({
        stored_bytes: limit,
      })
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        files_in_use: 2,
        stored_bytes: 2 * size,
      })
      // Back to the default (20 GB) with null.
      expect(
        (
          await gw.admin(`/accounts/${accountId}`, {
            method: 'PATCH',
            body: { max_stored_bytes: null },
          })
        ).status,
      ).toBe(200)
      await upload(openai)
    })

    test('racing uploads never pass a quota together: exactly max_files of 20, exactly 3 that fit the bytes', async () => {
      const files = await gw.newAccount('1', {}, { max_files: 5 })
      const results = await Promise.all(
        Array.from({ length: 20 }, () => failure(upload(sdk(files.key)))),
      )
      expect(results.filter((r) => r === null)).toHaveLength(5)
      expect(results.filter((r) => r instanceof OpenAI.RateLimitError)).toHaveLength(15)
      expect(await accountView(gw.admin, files.accountId)).toMatchObject({
        files_in_use: 5,
        stored_bytes: 5 * size,
      })

      const bytes = await gw.newAccount('1', {}, { max_stored_bytes: 3 * size + 10 })
      const raced = await Promise.all(
        Array.from({ length: 12 }, () => failure(upload(sdk(bytes.key)))),
      )
      expect(raced.filter((r) => r === null)).toHaveLength(3)
      expect(raced.filter((r) => r instanceof OpenAI.RateLimitError)).toHaveLength(9)
      expect(await accountView(gw.admin, bytes.accountId)).toMatchObject({
        files_in_use: 3,
        stored_bytes: 3 * size,
      })
      const listed = await sdk(bytes.key).files.list()
      expect(listed.data).toHaveLength(3)
    })

    test('bad quota values are 400s that say what to send', async () => {
      const { accountId } = await gw.newAccount('1')
      for (const body of [
        { max_files: -1 },
        { max_files: 1.5 },
        { max_stored_bytes: '10' },
        { max_files: 2 ** 31 },
      ]) {
        const response = await gw.admin(`/accounts/${accountId}`, { method: 'PATCH', body })
        expect(response.status).toBe(400)
        const error = ((await response.json()) as { error: { message: string; param: string } })
          .error
        expect(error.param).toBe(Object.keys(body)[0])
      }
      expect(
        (await gw.admin('/accounts/acct_missing', { method: 'PATCH', body: { max_files: 1 } }))
          .status,
      ).toBe(404)
    })
  })
}

describe.skipIf(!TEST_DATABASE_URL)('file quotas across two instances (postgres)', () => {
  test('uploads racing on two instances sharing PostgreSQL pass max_files and max_stored_bytes no more than on one', async () => {
    const a = await startTestGateway({ store: 'postgres', env: { MULTIGRID_DISPATCH: '0' } })
    const b = await startTestGateway({
      env: { MULTIGRID_DISPATCH: '0', DATABASE_URL: a.env.DATABASE_URL! },
    })
    try {
      const content = jsonl([chatLine('a', 'z'.repeat(500))])
      const size = Buffer.byteLength(content)
      const race = async (key: string, n: number) =>
        Promise.all(
          Array.from({ length: n }, async (_, i) => {
            const openai = new OpenAI({
              apiKey: key,
              baseURL: `${(i % 2 ? a : b).url}/openai/v1`,
              maxRetries: 0,
            })
            return failure(
              openai.files.create({
                file: await toFile(Buffer.from(content), 'a.jsonl'),
                purpose: 'batch',
              }),
            )
          }),
        )
      const files = await a.newAccount('1', {}, { max_files: 4 })
      expect((await race(files.key, 24)).filter((r) => r === null)).toHaveLength(4)
      const bytes = await a.newAccount('1', {}, { max_stored_bytes: 5 * size })
      expect((await race(bytes.key, 24)).filter((r) => r === null)).toHaveLength(5)
      expect(await accountView(b.admin, bytes.accountId)).toMatchObject({
        files_in_use: 5,
        stored_bytes: 5 * size,
      })
    } finally {
      await a.stop()
      await b.stop()
    }
  }, 30_000)
})

describe('an upload past MULTIGRID_MAX_FILE_BYTES (sqlite)', () => {
  test('a body of unknown length is refused 413 as it grows past the limit, and leaves nothing', async () => {
    const gw = await startTestGateway({
      env: { MULTIGRID_DISPATCH: '0', MULTIGRID_MAX_FILE_BYTES: '100000' },
    })
    try {
      const { key, accountId } = await gw.newAccount('1')
      const line = new TextEncoder().encode(JSON.stringify(chatLine('x', 'y'.repeat(900))) + '\n')
      let pulls = 0
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulls++ === 0) controller.enqueue(new TextEncoder().encode(PART_HEAD))
          else if (pulls < 300) controller.enqueue(line)
          else controller.close()
        },
      })
      const response = await gw.request('/openai/v1/files', key, {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
        body,
        duplex: 'half',
      } as RequestInit)
      expect(response.status).toBe(413)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
        'file_too_large',
      )
      expect(await storedContent(gw.env)).toEqual([])
      expect(await accountView(gw.admin, accountId)).toMatchObject({
        files_in_use: 0,
        stored_bytes: 0,
      })
    } finally {
      await gw.stop()
    }
  })
})
