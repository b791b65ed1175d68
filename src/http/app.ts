/**
 * The HTTP application: one Elysia instance per route group, composed here, and the one place
 * that turns errors into answers. A GatewayError is a refusal with its own status; anything else
 * is a bug, logged and answered 500 without details.
 */
import { Elysia } from 'elysia'
import { badRequest, GatewayError, refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import { BodyAborted } from '../ingest/read-body.ts'
import type { Logger } from '../telemetry/logger.ts'
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.ts'
import { responseHeaders } from './caller-macro.ts'
import { headTooLarge } from './head-limit.ts'
import { anthropicErrorResponse, unknownAnthropicRoute } from './anthropic/anthropic-errors.ts'
import { observeRequests, pathOf } from './observe-requests.ts'
import { pathMethods } from './route-matcher.ts'
import { openApiRoutes } from './openapi.ts'
import { storedResponseRefusal } from './responses/responses-routes.ts'
import { misroutedRequest } from './misrouted.ts'
import { answeredRequestId, REQUEST_ID_HEADER, requestIdOf } from './request-id.ts'

/** Where Anthropic's API is served: its errors go in Anthropic's shape (docs/clients/anthropic-sdk.md). */
const ANTHROPIC_SURFACE = '/anthropic'

export function createApp(
  logger: Logger,
  groups: Elysia<any, any, any, any, any, any, any>[],
  telemetry: Telemetry = noTelemetry,
) {
  // Observed outermost: the wrapper sees the answer each request is sent, the error handler's too.
  const app = observeRequests(new Elysia(), logger, telemetry).onError(
    ({ error, code, set, request }) => {
      const headers = responseHeaders(set)
      if (error instanceof BodyAborted) {
        // No one is there to read the answer; an ordinary event, not a fault of the gateway.
        logger.info('http.aborted', {
          method: request.method,
          path: new URL(request.url).pathname,
          reason: error.reason,
        })
      }
      const unrouted = code === 'NOT_FOUND' ? noRoute(request, methodsOf) : null
      return answer(
        unrouted ??
          refusalFor(error, code, { request, logger, requestId: answeredRequestId(headers) }),
        request,
        headers,
      )
    },
  )
  const methodsOf = pathMethods(() => app.routes)
  // Before routing: every answer carries the request's id, and a head over the limit is refused
  // whatever the route.
  app.onRequest(({ request, set }) => {
    const refusal = headTooLarge(request)
    const id = requestIdOf(request)
    const headers = responseHeaders(set)
    headers[REQUEST_ID_HEADER] = id
    // Anthropic's SDK reads its own header name for the same thing.
    if (onAnthropicSurface(pathOf(request.url))) headers['request-id'] = id
    return refusal && answer(refusal, request, headers)
  })
  for (const group of groups) app.use(group)
  // The document of every route above, read from the route table itself.
  app.use(openApiRoutes(() => app.routes))
  return app
}

/**
 * A request no route took: a 405 naming the methods the path does take, or a 404 (under
 * /anthropic, naming the routes there are).
 */
function noRoute(request: Request, methodsOf: (path: string) => string[]): GatewayError {
  const path = pathOf(request.url)
  const stored = storedResponseRefusal(path) ?? misroutedRequest(request.method, path)
  if (stored) return stored
  const allowed = methodsOf(path)
  if (allowed.length > 0)
    return refuse(
      'method_not_allowed',
      `${excerpt(request.method)} is not allowed on ${excerpt(path)}; it takes ${allowed.join(' or ')}`,
      { headers: { allow: allowed.join(', ') } },
    )
  if (onAnthropicSurface(path)) return unknownAnthropicRoute(request, path)
  // The admin API is mounted only with MULTIGRID_ADMIN_TOKEN set: say so, not just "no route".
  if (/^\/admin(?:\/|$)/.test(path) && methodsOf('/admin/v1/accounts').length === 0)
    return refuse(
      'unknown_route',
      `the admin API is off on this gateway: start it with MULTIGRID_ADMIN_TOKEN set (at least 16 characters) and send that token as "Authorization: Bearer …"; without it, npm run mg -- … manages accounts and keys on the same store`,
    )
  return refuse('unknown_route', `no route for ${excerpt(request.method)} ${excerpt(path)}`)
}

/** The refusal an error amounts to; anything not a refusal is a bug, logged and answered 500. */
function refusalFor(
  error: unknown,
  code: unknown,
  { request, logger, requestId }: { request: Request; logger: Logger; requestId?: string },
): GatewayError {
  if (error instanceof GatewayError) return error
  if (code === 'PARSE' || code === 'VALIDATION') {
    const message =
      code === 'PARSE'
        ? 'the body is not valid JSON'
        : 'the request does not match the expected shape'
    return badRequest(message)
  }
  // PostgreSQL text cannot hold U+0000 (SQLSTATE 22021). Only a caller's input carries one (an
  // id in the path, a cursor, a field), so it is a bad request wherever it reached the store.
  if ((error as { code?: unknown } | null)?.code === '22021') {
    return badRequest(
      'the request contains a NUL character (%00 or \\u0000), which no id, name or field may hold; remove it',
    )
  }
  if (storeUnreachable(error)) {
    logger.warn('http.store_unavailable', {
      method: request.method,
      path: new URL(request.url).pathname,
      request_id: requestId,
      reason: String((error as Error)?.message ?? error),
    })
    return refuse(
      'store_unavailable',
      "the gateway's store cannot be reached right now, so the request was not completed and nothing was changed; send it again in a few seconds",
      { headers: { 'retry-after': '5' } },
    )
  }
  logger.error('http.unhandled', {
    method: request.method,
    path: new URL(request.url).pathname,
    request_id: requestId,
    error: (error as Error)?.stack ?? String(error),
  })
  return refuse(
    'internal_error',
    `internal error; the request was not completed${requestId ? ` (request ${requestId}: quote it to the operator)` : ''}`,
  )
}

/**
 * The codes of a store connection that failed or could not be made (the socket's, postgres.js's,
 * and PostgreSQL's own "shutting down", "cannot connect now", "too many connections"): an outage,
 * not a fault of the gateway, so a 503 the clients retry rather than a 500.
 */
const STORE_UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  '57P01',
  '57P02',
  '57P03',
  '53300',
])

function storeUnreachable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && STORE_UNREACHABLE.has(code)
}

/** Whether a path is Anthropic's API here, whose refusals come in Anthropic's shape. */
const onAnthropicSurface = (path: string) =>
  path === ANTHROPIC_SURFACE || path.startsWith(`${ANTHROPIC_SURFACE}/`)

/** A refusal in the shape of the surface asked: Anthropic's under /anthropic, the gateway's elsewhere. */
function answer(
  refusal: GatewayError,
  request: Request,
  headers: Record<string, string>,
): Response {
  return onAnthropicSurface(pathOf(request.url))
    ? anthropicErrorResponse(refusal, headers)
    : refusal.toResponse(headers)
}
