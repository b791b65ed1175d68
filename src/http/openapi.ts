/**
 * `GET /openapi.json`: an OpenAPI 3.1 document of every route this gateway serves, made from
 * the application's own route table (so it cannot list a route that does not exist, nor miss
 * one), with the request schemas the zod definitions give for the bodies that have one. Built on
 * the first request, then kept. The facades' deviations from the APIs they copy are described in
 * docs/clients/; the document names each route's surface as its tag.
 */
import { Elysia } from 'elysia'
import { z } from 'zod'
import { chatBodySchema, embeddingsBodySchema } from '../schemas/requests.ts'

interface RouteEntry {
  method: string
  path: string
}

/** Each surface by the prefix its routes share, most specific first. */
const SURFACES: [prefix: string, tag: string][] = [
  ['/openai/v1', 'OpenAI-compatible facade (docs/openai-facade.md)'],
  ['/anthropic/v1', 'Anthropic API (docs/clients/anthropic-sdk.md)'],
  ['/admin/v1', 'Admin API (docs/operations.md)'],
  ['/dashboard', 'Dashboard'],
  ['/v1', 'Native API (docs/native-api.md, docs/live.md, docs/clients/responses.md)'],
]

/** The request bodies with a schema of their own, by path suffix. */
const BODIES: [suffix: string, schema: z.ZodType][] = [
  ['/chat/completions', chatBodySchema],
  ['/embeddings', embeddingsBodySchema],
]

const tagOf = (path: string) =>
  SURFACES.find(([prefix]) => path.startsWith(prefix))?.[1] ?? 'Operations'

function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  try {
    return z.toJSONSchema(schema, { unrepresentable: 'any', io: 'input' }) as Record<
      string,
      unknown
    >
  } catch {
    return { type: 'object' }
  }
}

export function buildOpenApi(routes: readonly RouteEntry[]) {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) {
    const method = route.method.toLowerCase()
    if (!['get', 'post', 'delete', 'put', 'patch'].includes(method)) continue
    if (route.path.includes('*') || route.path === '/openapi.json') continue
    const path = route.path.replace(/:([A-Za-z_]+)/g, '{$1}')
    const parameters = [...path.matchAll(/\{([A-Za-z_]+)\}/g)].map(([, name]) => ({
      name,
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }))
    const body = BODIES.find(([suffix]) => path.endsWith(suffix))?.[1]
    const operation: Record<string, unknown> = {
      tags: [tagOf(path)],
      operationId: `${method}${path.replace(/[^A-Za-z0-9]+/g, '_')}`,
      responses: { default: { description: 'see the SPEC section of its surface' } },
    }
    if (parameters.length > 0) operation.parameters = parameters
    if (body && method === 'post')
      operation.requestBody = {
        required: true,
        content: { 'application/json': { schema: jsonSchema(body) } },
      }
    paths[path] = { ...paths[path], [method]: operation }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Multigrid',
      version: '1',
      description:
        'A self-hostable multi-provider LLM batch gateway: the native batch API, live endpoints, the OpenAI-compatible facade, the Anthropic API and the admin API. How the facades differ from the APIs they copy: docs/clients/.',
    },
    tags: [
      ...new Set(
        Object.values(paths)
          .flatMap((ops) => Object.values(ops))
          .map((op) => (op as { tags: string[] }).tags[0]),
      ),
    ].map((name) => ({ name })),
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
    security: [{ bearer: [] }],
    paths,
  }
}

/** The route, reading the application's routes when first asked. */
export function openApiRoutes(routes: () => readonly RouteEntry[]) {
  let document: ReturnType<typeof buildOpenApi> | null = null
  return new Elysia({ name: 'openapi' }).get('/openapi.json', () => {
    document ??= buildOpenApi(routes())
    return document
  })
}
