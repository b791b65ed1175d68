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
import { observeRequests } from './observe-requests.ts'
import { openApiRoutes } from './openapi.ts'

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
      if (error instanceof GatewayError) return error.toResponse(headers)
      if (code === 'NOT_FOUND') {
        const path = new URL(request.url).pathname
        return refuse(
          'unknown_route',
          `no route for ${excerpt(request.method)} ${excerpt(path)}`,
        ).toResponse(headers)
      }
      if (code === 'PARSE' || code === 'VALIDATION') {
        const message =
          code === 'PARSE'
            ? 'the body is not valid JSON'
            : 'the request does not match the expected shape'
        return badRequest(message).toResponse(headers)
      }
      // PostgreSQL text cannot hold U+0000 (SQLSTATE 22021). Only a caller's input carries one (an
      // id in the path, a cursor, a field), so it is a bad request wherever it reached the store.
      if ((error as { code?: unknown } | null)?.code === '22021') {
        return badRequest(
          'the request contains a NUL character (%00 or \\u0000), which no id, name or field may hold; remove it',
        ).toResponse(headers)
      }
      logger.error('http.unhandled', {
        method: request.method,
        path: new URL(request.url).pathname,
        error: (error as Error)?.stack ?? String(error),
      })
      return refuse('internal_error', 'internal error; the request was not completed').toResponse(
        headers,
      )
    },
  )
  // Before routing: a head over the limit is refused whatever the route.
  app.onRequest(({ request }) => headTooLarge(request))
  for (const group of groups) app.use(group)
  // The document of every route above, read from the route table itself.
  app.use(openApiRoutes(() => app.routes))
  return app
}
