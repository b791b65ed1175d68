import { describe, expect, test } from 'bun:test'
import { classifyStatus, parseRetryAfter, redactKey } from '../../providers/classify-error.ts'
import { readSseEvents } from '../../providers/read-sse-events.ts'

const headers = (values: Record<string, string>) => (name: string) => values[name] ?? null

describe('retry hints', () => {
  const now = Date.parse('2026-01-01T00:00:00Z')
  test('retry-after-ms wins, then retry-after seconds or HTTP-date', () => {
    expect(parseRetryAfter(headers({ 'retry-after-ms': '1500', 'retry-after': '9' }), now)).toBe(
      1500,
    )
    expect(parseRetryAfter(headers({ 'retry-after': '2' }), now)).toBe(2000)
    expect(parseRetryAfter(headers({ 'retry-after': '0.5' }), now)).toBe(500)
    expect(parseRetryAfter(headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:03 GMT' }), now)).toBe(
      3000,
    )
    expect(parseRetryAfter(headers({ 'retry-after': 'Wed, 31 Dec 2025 23:00:00 GMT' }), now)).toBe(
      0,
    )
    expect(parseRetryAfter(headers({ 'retry-after': 'soon' }), now)).toBeNull()
    expect(parseRetryAfter(headers({}), now)).toBeNull()
  })
})

describe('statuses', () => {
  const none = headers({})
  test('kinds and retryability', () => {
    const cases: [number, string, boolean][] = [
      [429, 'rate_limited', true],
      [500, 'server_error', true],
      [503, 'busy', true],
      [529, 'busy', true],
      [408, 'timeout', true],
      [401, 'auth', false],
      [403, 'auth', false],
      [400, 'invalid_request', false],
      [404, 'invalid_request', false],
      [422, 'invalid_request', false],
    ]
    for (const [status, kind, retryable] of cases) {
      expect(classifyStatus(status, none, '{}', null)).toMatchObject({ kind, retryable, status })
    }
  })

  test('context length, as OpenAI, Anthropic, vLLM and TGI say it', () => {
    const bodies = [
      { error: { message: 'too long', code: 'context_length_exceeded' } },
      {
        type: 'error',
        error: { type: 'invalid_request_error', message: 'prompt is too long: 9 > 8' },
      },
      { object: 'error', message: "This model's maximum context length is 4096 tokens." },
      { error: '`inputs` tokens + `max_new_tokens` must be <= 2048' },
    ]
    for (const body of bodies) {
      expect(classifyStatus(400, none, JSON.stringify(body), null).kind).toBe(
        'context_length_exceeded',
      )
    }
  })

  test('keys are redacted from messages and bodies; non-JSON bodies are kept short', () => {
    const body = JSON.stringify({
      error: { message: 'Incorrect API key provided: sk-abc1***********wxyz.' },
    })
    const error = classifyStatus(401, none, body, 'sk-abc1234567890wxyz')
    expect(error.message).not.toContain('sk-abc1')
    expect(JSON.stringify(error.body)).not.toContain('sk-abc1')
    expect(redactKey('key my-secret-value here', 'my-secret-value')).toBe('key [redacted] here')
    const html = classifyStatus(502, none, '<html>' + 'x'.repeat(5000), null)
    expect(html.message.length).toBeLessThan(400)
  })
})

describe('server-sent events', () => {
  test('split anywhere, CRLF, comments, multi-line data, last event without blank line', async () => {
    const text = ': hello\r\nevent: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\ndata: two\n\ndata: last'
    const bytes = new TextEncoder().encode(text)
    async function* pieces() {
      for (let i = 0; i < bytes.length; i += 3) yield bytes.subarray(i, i + 3)
    }
    const events = []
    for await (const event of readSseEvents(pieces())) events.push(event)
    expect(events).toEqual([
      { event: 'a', data: '{"x":\n1}' },
      { event: null, data: 'two' },
      { event: null, data: 'last' },
    ])
  })
})
