/**
 * Malformed submissions to POST /v1/batches, each with what a correct answer looks like. Every one
 * must be refused with a 4xx: a line-numbered issue when a line is at fault, a clear message when
 * the request as a whole is (content type, encoding, size, query).
 */
import { chatLine, embedLine } from '../helpers/gateway.ts'

export interface BadSubmission {
  name: string
  body: () => BodyInit
  contentType?: string | null
  query?: string
  headers?: Record<string, string>
  /** The status expected; any 4xx when absent. */
  status?: number
  /** The line of the first issue, for a file refused with invalid_batch_file. */
  line?: number
  /** The error code expected. */
  code?: string
}

/** The gateway these run against limits files to this many lines, so the limit is cheap to hit. */
export const CORPUS_MAX_LINES = 1000

const text = (value: unknown) => JSON.stringify(value)
const good = (id = 'ok') => text(chatLine(id))
const bytes = (...parts: (string | number[])[]) =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))))
/** A chat line whose body has `patch` applied (undefined deletes a field). */
const withBody = (patch: Record<string, unknown>, id = 'x') => {
  const line = chatLine(id)
  const body: Record<string, unknown> = { ...line.body, ...patch }
  for (const [key, value] of Object.entries(patch)) if (value === undefined) delete body[key]
  return text({ ...line, body })
}
const withEnvelope = (patch: Record<string, unknown>) => {
  const line: Record<string, unknown> = { ...chatLine('x'), ...patch }
  for (const [key, value] of Object.entries(patch)) if (value === undefined) delete line[key]
  return text(line)
}
/** `{"a": …}` or `[…]` nested `depth` levels, as text (JSON.stringify would overflow the stack). */
const deepArrays = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)
const deepObjects = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)
const lines = (...parts: string[]) => parts.join('\n') + '\n'
const MB2 = 2 * 1024 * 1024

/** Two lines: a good one, then the bad one, so the issue must name line 2. */
const second = (
  name: string,
  bad: () => string,
  extra: Partial<BadSubmission> = {},
): BadSubmission => ({
  name,
  body: () => lines(good('first'), bad()),
  line: 2,
  code: 'invalid_batch_file',
  ...extra,
})
/** Like `second`, with the whole body given (bytes that are no string). */
const secondRaw = (name: string, body: () => BodyInit): BadSubmission => ({
  name,
  body,
  line: 2,
  code: 'invalid_batch_file',
})
const embedSecond = (name: string, input: unknown) =>
  secondRaw(name, () =>
    lines(
      text(embedLine('first')),
      text({ ...embedLine('e'), body: { model: 'sim/embed', input } }),
    ),
  )

export const BAD_SUBMISSIONS: BadSubmission[] = [
  // Broken JSON
  second('truncated line mid-object', () => '{"custom_id": "b", "method": "POST",'),
  second('truncated line mid-string', () => good('b').slice(0, 40)),
  second('truncated inside an escape', () => '{"custom_id": "a\\u00'),
  second('truncated last line without newline', () => good('b').slice(0, -3)),
  second('a lone opening brace', () => '{'),
  second('a lone closing brace', () => '}'),
  second('single-quoted JSON', () => "{'custom_id': 'a'}"),
  second('a trailing comma', () => good('b').slice(0, -1) + ',}'),
  second('two objects on one line', () => good('b') + good('c')),
  second('trailing garbage after the object', () => good('b') + ' xyz'),
  second('NaN literal', () => good('b').replace('"max_tokens":32', '"max_tokens":NaN')),
  second('a comment line', () => '// the next line is fine'),
  second('CR-only line endings join two objects', () => good('b') + '\r' + good('c')),
  second('a BOM at the start of a later line', () => '\uFEFF' + good('b')),
  // Not an object
  second('an array line', () => '[]'),
  second('a null line', () => 'null'),
  second('a number line', () => '42'),
  second('a string line', () => '"hello"'),
  second('a boolean line', () => 'true'),
  {
    name: 'the whole file as one JSON array',
    body: () => text([chatLine('a'), chatLine('b')]),
    line: 1,
  },
  // Deep nesting
  second('100,000 nested arrays', () => deepArrays(100_000)),
  second('100,000 nested objects', () => deepObjects(100_000)),
  second('100,000 nested arrays in body.tools', () =>
    withBody({ tools: '@' }).replace(
      '"@"',
      `[{"type":"function","function":{"parameters":${deepArrays(100_000)}}}]`,
    ),
  ),
  second('100,000 nested arrays in a tool call', () =>
    withBody({ messages: '@' }).replace(
      '"@"',
      `[{"role":"assistant","content":null,"tool_calls":[{"a":${deepArrays(100_000)}}]},{"role":"user","content":"go"}]`,
    ),
  ),
  second('100,000 nested objects in response_format', () =>
    withBody({ response_format: '@' }).replace(
      '"@"',
      `{"type":"json_schema","json_schema":${deepObjects(100_000)}}`,
    ),
  ),
  second('100,000 nested arrays in an unknown body field', () =>
    withBody({ metadata_blob: '@' }).replace('"@"', deepArrays(100_000)),
  ),
  second('100,000 nested arrays in an unknown message field', () =>
    withBody({ messages: '@' }).replace(
      '"@"',
      `[{"role":"user","content":"hi","extra":${deepArrays(100_000)}}]`,
    ),
  ),
  // Huge numbers
  second('max_tokens 1e400 (Infinity)', () =>
    good('b').replace('"max_tokens":32', '"max_tokens":1e400'),
  ),
  second('max_tokens beyond 2^64', () =>
    good('b').replace('"max_tokens":32', '"max_tokens":99999999999999999999999'),
  ),
  second('n 1e308', () => withBody({ n: 1e308 })),
  second('temperature -1e309', () =>
    good('b').replace('"max_tokens":32', '"max_tokens":32,"temperature":-1e309'),
  ),
  second('seed 1e300', () => withBody({ seed: 1e300 })),
  second('custom_id as a huge number', () =>
    withEnvelope({ custom_id: '@' }).replace('"@"', '1e999'),
  ),
  // NUL bytes
  second('a raw NUL byte outside strings', () => good('b').replace('{', '{\u0000')),
  second('a raw NUL byte inside a string', () => good('b').replace('hello', 'he\u0000llo')),
  second('an escaped NUL in custom_id', () => withEnvelope({ custom_id: 'a\u0000b' })),
  { name: 'a file of only NUL bytes', body: () => new Uint8Array(64), line: 1 },
  // Invalid UTF-8
  secondRaw('a lone continuation byte', () =>
    bytes(good('a'), '\n{"custom_id": "', [0x80], '"}\n'),
  ),
  secondRaw('an overlong encoding', () =>
    bytes(good('a'), '\n{"custom_id": "', [0xc0, 0xaf], '"}\n'),
  ),
  secondRaw('an encoded surrogate', () =>
    bytes(good('a'), '\n{"custom_id": "', [0xed, 0xa0, 0x80], '"}'),
  ),
  secondRaw('a sequence cut at the end of the file', () =>
    bytes(good('a'), '\n', good('b'), [0xf0, 0x9f]),
  ),
  secondRaw('0xFF bytes', () => bytes(good('a'), '\n', [0xff, 0xfe, 0xff], '\n')),
  {
    name: 'a UTF-16LE file with its BOM',
    body: () => Buffer.from('\uFEFF' + good('a') + '\n', 'utf16le'),
    line: 1,
  },
  // 2 MB single lines
  second('a 2 MB line of garbage', () => 'x'.repeat(MB2)),
  second('a 2 MB custom_id', () => withEnvelope({ custom_id: 'i'.repeat(MB2) })),
  second('a 2 MB prompt with max_tokens over the limit', () =>
    text(chatLine('big', 'p'.repeat(MB2), { max_tokens: 5000 })),
  ),
  second('a 2 MB key name', () => withBody({ ['k'.repeat(MB2)]: 1 }).replace('"hello"', '7')),
  // Wrong types in every envelope field
  second('custom_id a number', () => withEnvelope({ custom_id: 7 })),
  second('custom_id null', () => withEnvelope({ custom_id: null })),
  second('custom_id an object', () => withEnvelope({ custom_id: { id: 'a' } })),
  second('custom_id empty', () => withEnvelope({ custom_id: '' })),
  second('custom_id missing', () => withEnvelope({ custom_id: undefined })),
  second('method GET', () => withEnvelope({ method: 'GET' })),
  second('method lower-case', () => withEnvelope({ method: 'post' })),
  second('method a number', () => withEnvelope({ method: 1 })),
  second('url /v1/responses', () => withEnvelope({ url: '/v1/responses' })),
  second('url a number', () => withEnvelope({ url: 42 })),
  second('url missing', () => withEnvelope({ url: undefined })),
  second('body null', () => withEnvelope({ body: null })),
  second('body a string', () => withEnvelope({ body: 'model=sim/chat' })),
  second('body an array', () => withEnvelope({ body: [chatLine('x').body] })),
  second('body missing', () => withEnvelope({ body: undefined })),
  second('an unknown envelope field', () => withEnvelope({ priority: 'high' })),
  second('__proto__ as an envelope key', () =>
    good('b').replace('{', '{"__proto__":{"custom_id":"p"},'),
  ),
  second('constructor as an envelope key', () => withEnvelope({ constructor: 'x' })),
  // Wrong types in every body field
  second('model a number', () => withBody({ model: 5 })),
  second('model empty', () => withBody({ model: '' })),
  second('model unknown', () => withBody({ model: 'nobody/nothing' })),
  second('model missing', () => withBody({ model: undefined })),
  second('messages a string', () => withBody({ messages: 'hello' })),
  second('messages empty', () => withBody({ messages: [] })),
  second('messages of numbers', () => withBody({ messages: [1] })),
  second('messages of empty objects', () => withBody({ messages: [{}] })),
  second('a message without content', () => withBody({ messages: [{ role: 'user' }] })),
  second('a message with numeric content', () =>
    withBody({ messages: [{ role: 'user', content: 12 }] }),
  ),
  second('an unknown role', () => withBody({ messages: [{ role: 'robot', content: 'x' }] })),
  second('max_tokens a string', () => withBody({ max_tokens: '32' })),
  second('max_tokens zero', () => withBody({ max_tokens: 0 })),
  second('max_tokens negative', () => withBody({ max_tokens: -5 })),
  second('max_tokens fractional', () => withBody({ max_tokens: 1.5 })),
  second('max_tokens true', () => withBody({ max_tokens: true })),
  second('n zero', () => withBody({ n: 0 })),
  second('n a string', () => withBody({ n: '2' })),
  second('temperature a string', () => withBody({ temperature: 'hot' })),
  second('temperature 3', () => withBody({ temperature: 3 })),
  second('stream true', () => withBody({ stream: true })),
  second('stream a string', () => withBody({ stream: 'yes' })),
  second('stop a number', () => withBody({ stop: 9 })),
  second('provider a string', () => withBody({ provider: 'sim' })),
  second('provider.order a string', () => withBody({ provider: { order: 'sim' } })),
  second('provider with an unknown key', () => withBody({ provider: { prefer: ['sim'] } })),
  second('provider.max_price.prompt negative', () =>
    withBody({ provider: { max_price: { prompt: '-0.5' } } }),
  ),
  second('provider.max_price.completion a word', () =>
    withBody({ provider: { max_price: { completion: 'cheap' } } }),
  ),
  second('provider.max_price below every offering', () =>
    withBody({ provider: { max_price: { prompt: 0.01 } } }),
  ),
  second('a parameter the model does not support', () =>
    withBody({ model: 'sim/strict', temperature: 0.5 }),
  ),
  // OpenAI's known parameters in shapes OpenAI would refuse
  second('tool_choice an unknown word', () => withBody({ tool_choice: 'sometimes' })),
  second('tool_choice a function without its name', () =>
    withBody({ tool_choice: { type: 'function', function: {} } }),
  ),
  second('logit_bias a bias over 100', () => withBody({ logit_bias: { '50256': 200 } })),
  second('logit_bias a word as the token id', () => withBody({ logit_bias: { hello: 1 } })),
  second('logit_bias a fractional bias', () => withBody({ logit_bias: { '1': 0.5 } })),
  second('response_format json_schema without a schema', () =>
    withBody({ response_format: { type: 'json_schema', json_schema: { name: 'a' } } }),
  ),
  second('response_format json_schema without json_schema', () =>
    withBody({ response_format: { type: 'json_schema' } }),
  ),
  second('tools of an unknown type', () => withBody({ tools: [{ type: 'retrieval' }] })),
  second('a function tool without a name', () =>
    withBody({ tools: [{ type: 'function', function: { parameters: {} } }] }),
  ),
  embedSecond('embeddings input a number', 3),
  embedSecond('embeddings input empty', []),
  embedSecond('embeddings input of objects', [{}]),
  // File-level problems
  second('mixed urls', () => text(embedLine('b'))),
  second('a duplicate custom_id', () => good('first')),
  { name: 'an empty body', body: () => '', line: 1 },
  { name: 'a file of only newlines', body: () => '\n'.repeat(1000), line: 1 },
  { name: 'a file of only spaces, tabs and CRs', body: () => ' \t\r\n'.repeat(500), line: 1 },
  {
    name: `more than ${CORPUS_MAX_LINES} lines`,
    body: () => lines(...Array.from({ length: CORPUS_MAX_LINES + 1 }, (_, i) => good(`l${i}`))),
    line: CORPUS_MAX_LINES + 1,
  },
  {
    name: '30 bad lines (25 shown)',
    body: () => lines(...Array.from({ length: 30 }, (_, i) => withBody({ n: 9 }, `n${i}`))),
    line: 1,
  },
  // Encodings and content types
  {
    name: 'gzip sent without saying so',
    body: () => Bun.gzipSync(Buffer.from(lines(good('a')))),
    status: 400,
    code: 'unsupported_encoding',
  },
  {
    name: 'gzip with Content-Encoding: gzip',
    body: () => Bun.gzipSync(Buffer.from(lines(good('a')))),
    headers: { 'content-encoding': 'gzip' },
    status: 415,
    code: 'unsupported_encoding',
  },
  {
    name: 'deflate sent without saying so',
    body: () => Bun.deflateSync(Buffer.from(lines(good('a')))),
    status: 400,
  },
  {
    name: 'multipart sent to the raw endpoint',
    body: () => {
      const form = new FormData()
      form.set('purpose', 'batch')
      form.set('file', new Blob([lines(good('a'))]), 'requests.jsonl')
      return form
    },
    contentType: null,
    status: 415,
  },
  {
    name: 'Content-Type application/xml',
    body: () => lines(good('a')),
    contentType: 'application/xml',
    status: 415,
  },
  {
    name: 'Content-Type image/png',
    body: () => lines(good('a')),
    contentType: 'image/png',
    status: 415,
  },
  {
    name: 'Content-Type text/html',
    body: () => lines(good('a')),
    contentType: 'text/html',
    status: 415,
  },
  { name: 'Content-Type ;;;', body: () => lines(good('a')), contentType: ';;;', status: 415 },
  {
    name: 'an OpenAI-shaped create as application/json',
    body: () =>
      text({
        input_file_id: 'file-abc',
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      }),
    contentType: 'application/json',
    status: 400,
    code: 'wrong_api_surface',
  },
  {
    name: 'a JSON object that is no line',
    body: () => text({ hello: 'world' }),
    contentType: 'application/json',
    line: 1,
  },
  // Query parameters and headers
  ...[
    '0',
    '169',
    'abc',
    '2.5',
    '-1',
    '',
    '1e3',
    '24h',
    '0x10',
    '1e2',
    ' 24',
    '+24',
    '024',
    '24.0',
  ].map((hours) => ({
    name: `completion_window_hours=${hours || '(empty)'}`,
    body: () => lines(good('a')),
    query: `?completion_window_hours=${encodeURIComponent(hours)}`,
    status: 400,
  })),
  { name: 'dry_run=maybe', body: () => lines(good('a')), query: '?dry_run=maybe', status: 400 },
  {
    name: 'a 257-character name',
    body: () => lines(good('a')),
    query: `?name=${'n'.repeat(257)}`,
    status: 400,
  },
  { name: 'a NUL in the name', body: () => lines(good('a')), query: '?name=a%00b', status: 400 },
  {
    name: 'a 257-character X-Multigrid-Batch-Name',
    body: () => lines(good('a')),
    headers: { 'x-multigrid-batch-name': 'n'.repeat(257) },
    status: 400,
  },
  {
    name: 'a body over 16 MiB',
    body: () => new Uint8Array(16 * 1024 * 1024 + 1).fill(0x20),
    status: 413,
  },
]
