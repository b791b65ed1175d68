/**
 * The OpenAPI 3.1 document, made from the application's route table and the surfaces' operation
 * tables: a path is in the document only if a route serves it, and a route with no entry in the
 * tables still appears (with only the error envelope), which the test of the document refuses.
 * Every schema in it is converted from a zod schema the gateway validates or renders with.
 */
import type { z } from 'zod'
import { ADMIN_OPERATIONS, DASHBOARD_OPERATIONS } from './admin-operations.ts'
import { componentSchemas, inputSchema, ref } from './components.ts'
import { ANTHROPIC_OPERATIONS, OPENAI_OPERATIONS } from './facade-operations.ts'
import { NATIVE_OPERATIONS } from './native-operations.ts'
import type { Answer, Body, Operation, Operations, Security } from './operation.ts'

export interface RouteEntry {
  method: string
  path: string
}

/** Every surface's operations, by "METHOD /path/{param}". */
export const OPERATIONS: Operations = {
  ...NATIVE_OPERATIONS,
  ...OPENAI_OPERATIONS,
  ...ANTHROPIC_OPERATIONS,
  ...ADMIN_OPERATIONS,
  ...DASHBOARD_OPERATIONS,
}

/** Each surface by the prefix its routes share, most specific first: the operation's tag. */
const SURFACES: [prefix: string, tag: string, description: string][] = [
  ['/openai/v1', 'OpenAI facade', "OpenAI's Files, Batches and live API (docs/openai-facade.md)"],
  [
    '/anthropic/v1',
    'Anthropic API',
    "Anthropic's Messages and Message Batches (docs/clients/anthropic-sdk.md)",
  ],
  ['/admin/v1', 'Admin API', 'Accounts, credit, keys and adapters (docs/operations.md)'],
  ['/dashboard', 'Dashboard', 'HTML pages for a browser (docs/dashboard-and-cli.md)'],
  ['/v1/webhooks', 'Webhooks', 'Signed deliveries when a batch ends (docs/events-and-webhooks.md)'],
  ['/v1/batches', 'Native batches', 'The raw-JSONL batch API (docs/native-api.md)'],
  [
    '/v1',
    'Native live and usage',
    'Live calls, models and usage (docs/live.md, docs/usage-and-metrics.md)',
  ],
  ['/', 'Operations', 'Health, readiness and metrics (docs/operations.md)'],
]
const tagOf = (path: string) =>
  path === '/'
    ? 'Dashboard'
    : SURFACES.find(
        ([prefix]) => path === prefix || path.startsWith(`${prefix === '/' ? '' : prefix}/`),
      )![1]

const SECURITY_SCHEMES = {
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

const securityOf = (security: Security) => {
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

function answerOf(answer: Answer, security: Security) {
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

function requestBodyOf(body: Body) {
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
function queryParameters(query: z.ZodObject) {
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

function operationOf(path: string, method: string, spec: Operation | undefined) {
  const refusal = path.startsWith('/anthropic/')
    ? { description: "a refusal, in Anthropic's error shape", schema: 'AnthropicError' as const }
    : { description: 'a refusal (docs/errors.md)', schema: 'Error' as const }
  const parameters: Record<string, unknown>[] = [...path.matchAll(/\{([A-Za-z_]+)\}/g)].map(
    ([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } }),
  )
  if (spec?.query) parameters.push(...queryParameters(spec.query))
  for (const [name, description] of Object.entries(spec?.headers ?? {}))
    parameters.push({
      name,
      in: 'header',
      required: false,
      description,
      schema: { type: 'string' },
    })
  const responses: Record<string, unknown> = {}
  for (const [status, answer] of Object.entries(spec?.answers ?? {}))
    responses[status] = answerOf(answer, spec?.security ?? 'key')
  responses.default = {
    description: refusal.description,
    content: { 'application/json': { schema: ref(refusal.schema) } },
  }
  return {
    tags: [tagOf(path)],
    operationId: spec?.id ?? `${method}${path.replace(/[^A-Za-z0-9]+/g, '_')}`,
    summary: spec?.summary ?? 'not yet described',
    ...(spec?.docs ? { description: `See ${spec.docs}.` } : {}),
    security: securityOf(spec?.security ?? 'key'),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(spec?.body ? { requestBody: requestBodyOf(spec.body) } : {}),
    responses,
  }
}

/** The route table's "METHOD /path/{param}" keys, without wildcards and the document itself. */
export function routeKeys(routes: readonly RouteEntry[]) {
  const keys: { key: string; method: string; path: string }[] = []
  for (const route of routes) {
    const method = route.method.toLowerCase()
    if (!['get', 'post', 'delete', 'put', 'patch'].includes(method)) continue
    if (route.path.includes('*') || route.path === '/openapi.json') continue
    const path = route.path.replace(/:([A-Za-z_]+)/g, '{$1}')
    keys.push({ key: `${route.method.toUpperCase()} ${path}`, method, path })
  }
  return keys
}

export function buildOpenApi(routes: readonly RouteEntry[]) {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const { key, method, path } of routeKeys(routes))
    paths[path] = { ...paths[path], [method]: operationOf(path, method, OPERATIONS[key]) }
  const used = new Set(
    Object.values(paths).flatMap((ops) =>
      Object.values(ops).map((op) => (op as { tags: string[] }).tags[0]),
    ),
  )
  return {
    openapi: '3.1.0',
    info: {
      title: 'Multigrid',
      version: '1',
      summary: 'A self-hostable multi-provider LLM batch gateway',
      description:
        'The native batch API, the live endpoints, the OpenAI-compatible facade, the Anthropic API and the admin API of this gateway. Made from the route table and the zod schemas the gateway validates and renders with (docs/development.md). How the facades differ from the APIs they copy: docs/openai-facade.md and docs/clients/. JSONL bodies are described as text, each line by its `x-multigrid-line-schema`.',
    },
    servers: [{ url: '/', description: 'this gateway' }],
    tags: SURFACES.filter(([, tag]) => used.has(tag)).map(([, name, description]) => ({
      name,
      description,
    })),
    components: { schemas: componentSchemas(), securitySchemes: SECURITY_SCHEMES },
    security: [{ key: [] }],
    paths,
  }
}
