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
import { withoutKeys } from '../telemetry/without-keys.ts'
import { routeMatcher, type RouteMatcher } from './route-matcher.ts'
import { REQUEST_ID_HEADER } from './request-id.ts'

/** Probes hit every few seconds; at info level they would drown the requests that matter. */
const QUIET_PATHS = new Set(['/healthz', '/readyz'])

type Handler = (...args: unknown[]) => Response | Promise<Response>

export function observeRequests(app: Elysia, logger: Logger, telemetry: Telemetry): Elysia {
  // Neither a log line nor a span would be made (LOG_LEVEL above info, no exporter): nothing
  // to observe, so no hook on every route and no wrapper around every request.
  if (!telemetry.enabled && !logger.enabled('info')) return app
  const routeOf = routeMatcher(() => app.routes)
  const log = requestLog(logger, routeOf)
  app.wrap(((handle: Handler, request: Request) =>
    (...args: unknown[]) => {
      const started = performance.now()
      const answered = telemetry.enabled
        ? telemetry.request(
            request,
            async () => handle(...args),
            () => routeOf(request.method, pathOf(request.url)),
          )
        : handle(...args)
      if (!(answered instanceof Promise)) {
        log(request, answered, started)
        return answered
      }
      return answered.then((response) => {
        log(request, response, started)
        return response
      })
    }) as never)
  return app
}

/**
 * The `http.request` line of one answered request, made once the answer is there; the route
 * pattern (`/v1/batches/:id`) is looked up only for a line that is written. Its own function so
 * bench/proxy.ts can time a line alone (about a microsecond, formatting and the batched write included).
 */
export function requestLog(logger: Logger, routeOf: RouteMatcher) {
  const quietLogged = logger.enabled('debug')
  return (request: Request, response: Response, started: number) => {
    const path = pathOf(request.url)
    const quiet = QUIET_PATHS.has(path)
    if (quiet && !quietLogged) return
    const fields = {
      request_id: response.headers.get(REQUEST_ID_HEADER),
      method: request.method,
      route: routeOf(request.method, path),
      path: withoutKeys(path),
      status: response.status,
      duration_ms: Math.round((performance.now() - started) * 10) / 10,
    }
    if (quiet) logger.debug('http.request', fields)
    else logger.info('http.request', fields)
  }
}

/** A path of plain characters, which URL would leave as it is: no dot segment, escape or backslash to resolve. */
const PLAIN_PATH = /^\/[A-Za-z0-9_\-~/]*$/

/**
 * `new URL(url).pathname`, without parsing the URL when its path is plain (a URL parse cost
 * about a microsecond, on every request logged).
 */
export function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  if (start > 0) {
    const query = url.indexOf('?', start)
    const hash = url.indexOf('#', start)
    const end = Math.min(query < 0 ? url.length : query, hash < 0 ? url.length : hash)
    const path = url.slice(start, end)
    if (PLAIN_PATH.test(path)) return path
  }
  return new URL(url).pathname
}
