/**
 * Every HTTP request, observed once at the outermost layer: one `http.request` log line when it
 * is answered and, with telemetry on, one server span around its whole handling, so the spans
 * made while handling it (admission, live upstream calls) are its children.
 *
 * The wrapper sits around Elysia's fetch (`wrap`), not in onAfterResponse: only there is the
 * status of a returned Response (202, a streamed 200, the error handler's 4xx) the one sent.
 * test/ops/telemetry.test.ts and logs.test.ts fail if an Elysia upgrade changes that.
 */
import type { Elysia } from 'elysia'
import type { Logger } from '../telemetry/logger.ts'
import type { Telemetry } from '../telemetry/telemetry.ts'

/** Probes hit every few seconds; at info level they would drown the requests that matter. */
const QUIET_PATHS = new Set(['/healthz', '/readyz'])

type Handler = (...args: unknown[]) => Response | Promise<Response>

export function observeRequests(app: Elysia, logger: Logger, telemetry: Telemetry): Elysia {
  // The route pattern (`/v1/batches/:id`) is known once the router matched; the request object
  // is the same one the wrapper sees, so it is the key.
  const routes = new WeakMap<Request, string>()
  const remember = ({ request, route }: { request: Request; route?: string }) => {
    if (route) routes.set(request, route)
  }
  app.onTransform({ as: 'global' }, remember)
  app.onError({ as: 'global' }, remember)
  app.wrap(((handle: Handler, request: Request) =>
    (...args: unknown[]) => {
      const started = performance.now()
      const routeOf = () => routes.get(request) ?? null
      return telemetry
        .request(request, async () => handle(...args), routeOf)
        .then((response) => {
          const path = new URL(request.url).pathname
          const fields = {
            method: request.method,
            route: routeOf(),
            path,
            status: response.status,
            duration_ms: Math.round((performance.now() - started) * 10) / 10,
          }
          if (QUIET_PATHS.has(path)) logger.debug('http.request', fields)
          else logger.info('http.request', fields)
          return response
        })
    }) as never)
  return app
}
