/**
 * The OpenAPI 3.1 document, made from the application's route table and the surfaces' operation
 * tables: a path is in the document only if a route serves it, and a route with no entry in the
 * tables still appears (with only the error envelope), which the test of the document refuses.
 * Every schema in it is converted from a zod schema the gateway validates or renders with.
 */
import { ADMIN_OPERATIONS, DASHBOARD_OPERATIONS } from './admin-operations.ts'
import { componentSchemas, ref } from './components.ts'
import { ANTHROPIC_OPERATIONS, OPENAI_OPERATIONS } from './facade-operations.ts'
import { NATIVE_OPERATIONS } from './native-operations.ts'
import type { Operation, Operations } from './operation.ts'
import {
  answerOf,
  commonRefusals,
  queryParameters,
  requestBodyOf,
  SECURITY_SCHEMES,
  securityOf,
} from './operation-parts.ts'

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
    "Anthropic's Messages, Message Batches and Models (docs/clients/anthropic-sdk.md)",
  ],
  ['/admin/v1', 'Admin API', 'Accounts, credit, keys and fine-tunes (docs/operations.md)'],
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
  const refused = (description: string) => ({
    description,
    content: { 'application/json': { schema: ref(refusal.schema) } },
  })
  if (!isDashboard(path))
    for (const [status, description] of commonRefusals(path, spec))
      responses[status] ??= refused(description)
  responses.default = isDashboard(path)
    ? {
        description: 'a refusal, as a page',
        content: { 'text/html': { schema: { type: 'string' } } },
      }
    : refused(refusal.description)
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

const isDashboard = (path: string) => tagOf(path) === 'Dashboard'

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
