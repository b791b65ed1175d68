/**
 * The parts of an operation in the document: its security, parameters, request body and answers,
 * each from the surface table's entry (operation.ts) and the zod schemas it names.
 */
import type { z } from 'zod'
import { inputSchema, ref } from './components.ts'
import type { Answer, Body, Operation, Security } from './operation.ts'

export const SECURITY_SCHEMES = {
  key: {
    type: 'http',
    scheme: 'bearer',
    description:
      'An API key of an account (mg_…), with the scope the route needs (docs/native-api.md#keys-and-scopes)',
  },
  anthropicKey: {
    type: 'apiKey',
    in: 'header',
    name: 'x-api-key',
    description:
      'The same API key as the Anthropic SDK sends it; `Authorization: Bearer` works too',
  },
  admin: {
    type: 'http',
    scheme: 'bearer',
    description: 'MULTIGRID_ADMIN_TOKEN (docs/operations.md)',
  },
  metrics: {
    type: 'http',
    scheme: 'bearer',
    description: 'MULTIGRID_METRICS_TOKEN, when it is set; open otherwise',
  },
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: 'multigrid_session',
    description: "The dashboard's session, made by POST /dashboard/sign-in",
  },
} as const

export const securityOf = (security: Security) => {
  if (security === 'none') return []
  if (security === 'anthropicKey') return [{ anthropicKey: [] }, { key: [] }]
  if (security === 'metrics') return [{ metrics: [] }, {}]
  return [{ [security]: [] }]
}

const oneOrMore = (names: string | string[]) =>
  Array.isArray(names) ? { anyOf: names.map((name) => ref(name as never)) } : ref(names as never)

/** docs/native-api.md "Rate limits": on every answer to a key. */
const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': "the key's requests per minute",
  'X-RateLimit-Remaining': "what is left of this minute's budget",
  'X-RateLimit-Reset': 'seconds until the budget is back',
}

const headersOf = (headers: Record<string, string>) =>
  Object.fromEntries(
    Object.entries(headers).map(([name, description]) => [
      name,
      { description, schema: { type: 'string' } },
    ]),
  )

export function answerOf(answer: Answer, security: Security) {
  const headers = {
    ...(security === 'key' || security === 'anthropicKey' ? RATE_LIMIT_HEADERS : {}),
    ...answer.headers,
  }
  const body = answerBodyOf(answer)
  return Object.keys(headers).length > 0 ? { ...body, headers: headersOf(headers) } : body
}

function answerBodyOf(answer: Answer) {
  if ('json' in answer)
    return {
      description: answer.description,
      content: {
        'application/json': { schema: oneOrMore(answer.json) },
        ...(answer.streams ? { 'text/event-stream': { schema: { type: 'string' } } } : {}),
      },
    }
  if ('jsonl' in answer)
    return {
      description: answer.description,
      content: {
        [answer.media ?? 'application/jsonl']: {
          // OpenAPI 3.1 has no schema for the items of a line-delimited body: the text is a
          // string, and each of its lines is one of these (x-multigrid-line-schema).
          schema: { type: 'string' },
          'x-multigrid-line-schema': oneOrMore(answer.jsonl),
        },
      },
    }
  if ('media' in answer)
    return {
      description: answer.description,
      content: { [answer.media]: { schema: { type: 'string' } } },
    }
  return { description: answer.description }
}

const JSONL_TYPES = ['application/jsonl', 'application/x-ndjson', 'text/plain']

export function requestBodyOf(body: Body) {
  if ('json' in body)
    return {
      required: body.required ?? true,
      ...(body.description ? { description: body.description } : {}),
      content: { 'application/json': { schema: inputSchema(body.json) } },
    }
  if ('jsonl' in body) {
    const media = { schema: { type: 'string' }, 'x-multigrid-line-schema': ref(body.jsonl) }
    return {
      required: true,
      description: body.description,
      content: Object.fromEntries(JSONL_TYPES.map((type) => [type, media])),
    }
  }
  const [type, schema] =
    'multipart' in body
      ? ['multipart/form-data', body.multipart]
      : ['application/x-www-form-urlencoded', body.form]
  return {
    required: true,
    ...(body.description ? { description: body.description } : {}),
    content: { [type]: { schema } },
  }
}

/** The query's fields as parameters, each with its JSON Schema from the zod object. */
export function queryParameters(query: z.ZodObject) {
  const schema = inputSchema(query) as {
    properties?: Record<string, Record<string, unknown>>
    required?: string[]
  }
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({
    name,
    in: 'query',
    required: schema.required?.includes(name) ?? false,
    ...(typeof property.description === 'string' ? { description: property.description } : {}),
    schema: property,
  }))
}

/**
 * The refusals every such route can answer (docs/errors.md), listed for clients that generate
 * code per status; every other refusal is `default`, in the same envelope.
 */
export function commonRefusals(path: string, spec: Operation | undefined): [number, string][] {
  const security = spec?.security ?? 'key'
  const found: [number, string][] = []
  if (spec?.body || spec?.query)
    found.push([400, 'invalid_request: a field is wrong (`param` names it)'])
  if (security === 'key' || security === 'anthropicKey')
    found.push(
      [401, 'invalid_api_key'],
      [403, 'insufficient_permissions: the key lacks the scope'],
      [429, 'rate_limit_exceeded or limit_exceeded'],
    )
  if (security === 'admin') found.push([401, 'invalid_admin_token'])
  if (path.includes('{')) found.push([404, 'not_found: no such object on this account'])
  return found
}
