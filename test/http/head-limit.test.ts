/**
 * A request's head over 16 KiB is refused 431 in the error envelope (src/http/head-limit.ts), by
 * a gateway started as `npm start` starts it (Bun's own head limit raised to 64 KiB): only a head
 * over Bun's limit gets Bun's bare 431. Over real sockets, against a gateway process.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GATEWAY_BUN_ARGS, MAX_HEAD_BYTES, PARSER_HEAD_BYTES } from '../../src/http/head-limit.ts'
import { freePort, spawnGatewayProcess, type GatewayProcess } from '../helpers/process-gateway.ts'
import { rawWire } from '../helpers/raw-http.ts'

const ROOT = join(import.meta.dir, '../..')

const withHeader = (bytes: number) =>
  `GET /v1/models HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(bytes)}\r\n\r\n`

describe('request heads', () => {
  let gateway: GatewayProcess

  beforeAll(async () => {
    gateway = await spawnGatewayProcess({
      PORT: String(freePort()),
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-head-')),
      MULTIGRID_DISPATCH: '0',
      LOG_LEVEL: 'error',
    })
  })
  afterAll(async () => {
    await gateway?.kill('SIGTERM')
  })

  test('a head within 16 KiB reaches the route; over it, up to 64 KiB, it is 431 in the envelope', async () => {
    // Within the limit: the route answers (401, no key), not the parser.
    const small = await rawWire(gateway.url, withHeader(MAX_HEAD_BYTES - 200))
    expect(small).toStartWith('HTTP/1.1 401')
    for (const bytes of [MAX_HEAD_BYTES + 1_000, PARSER_HEAD_BYTES - 1_000]) {
      const answer = await rawWire(gateway.url, withHeader(bytes))
      expect(answer).toStartWith('HTTP/1.1 431')
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as {
        error: { code: string; type: string; message: string; param: null }
      }
      expect(body.error).toMatchObject({
        code: 'headers_too_large',
        type: 'invalid_request_error',
        param: null,
      })
      expect(body.error.message).toContain(String(MAX_HEAD_BYTES))
    }
    // A long URL counts as much as a header.
    const url = await rawWire(
      gateway.url,
      `GET /v1/batches?after=${'b'.repeat(MAX_HEAD_BYTES)} HTTP/1.1\r\nHost: a\r\n\r\n`,
    )
    expect(url).toStartWith('HTTP/1.1 431')
    expect(url).toContain('"headers_too_large"')
  })

  test("under /anthropic the 431 comes in Anthropic's error shape, as every refusal there does", async () => {
    const answer = await rawWire(
      gateway.url,
      `POST /anthropic/v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nX-Big: ${'a'.repeat(MAX_HEAD_BYTES + 1_000)}\r\n\r\n{}`,
    )
    expect(answer).toStartWith('HTTP/1.1 431')
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as {
      type: string
      error: { type: string; message: string }
    }
    expect(body.type).toBe('error')
    expect(body.error.type).toBe('invalid_request_error')
    expect(body.error.message).toContain(String(MAX_HEAD_BYTES))
  })

  test('over Bun’s own limit, Bun answers itself, bare; the gateway keeps serving', async () => {
    const answer = await rawWire(gateway.url, withHeader(PARSER_HEAD_BYTES + 1_000))
    expect(answer).toMatch(/^HTTP\/1.1 431 [^\r]+\r\nConnection: close\r\n\r\n$/)
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
  })

  test('npm start and the Dockerfile start the gateway with that limit', () => {
    const scripts = (
      JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
        scripts: Record<string, string>
      }
    ).scripts
    const flag = GATEWAY_BUN_ARGS.join(' ')
    expect(scripts.start).toContain(`bun ${flag} src/main.ts`)
    expect(scripts.test).toContain(`bun ${flag} test`)
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    expect(dockerfile).toContain(
      `CMD ["bun", ${GATEWAY_BUN_ARGS.map((a) => JSON.stringify(a)).join(', ')}, "src/main.ts"]`,
    )
  })
})
