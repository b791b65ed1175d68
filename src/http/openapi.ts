/**
 * `GET /openapi.json`: the OpenAPI 3.1 document of every route this gateway serves, made from the
 * application's own route table and the zod schemas the routes validate and render with
 * (openapi/build-openapi.ts). Built on the first request, then kept.
 */
import { Elysia } from 'elysia'
import { buildOpenApi, type RouteEntry } from './openapi/build-openapi.ts'

/** The route, reading the application's routes when first asked. */
export function openApiRoutes(routes: () => readonly RouteEntry[]) {
  let document: ReturnType<typeof buildOpenApi> | null = null
  return new Elysia({ name: 'openapi' }).get('/openapi.json', () => {
    document ??= buildOpenApi(routes())
    return document
  })
}
