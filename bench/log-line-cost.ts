/**
 * What LOG_LEVEL=info adds to a live call in CPU, timed in this process (bench/proxy.ts): the
 * `http.request` line of one request (path, route lookup, formatting) and its share of the batched
 * write, here to /dev/null. Steadier than the difference of two gateways' CPU per request on a
 * shared box, which swings by more than this whole figure from run to run.
 */
import { closeSync, openSync } from 'node:fs'
import { requestLog } from '../src/http/observe-requests.ts'
import { routeMatcher } from '../src/http/route-matcher.ts'
import { createLogger } from '../src/telemetry/logger.ts'
import { createLineBatches, LOG_FLUSH_MS, LOG_MAX_BYTES } from '../src/telemetry/log-batches.ts'
import { timeOf } from './lib.ts'

/** µs per logged request, `routes` being the gateway's route table (its size sets the lookup's cost). */
export function timeLogLine(
  routes: readonly { method: string; path: string }[],
  url: string,
): number {
  const fd = openSync('/dev/null', 'w')
  try {
    const batches = createLineBatches({ fd, flushMs: LOG_FLUSH_MS, maxBytes: LOG_MAX_BYTES })
    const log = requestLog(
      createLogger('info', (line) => batches.write(line)),
      routeMatcher(() => routes),
    )
    const request = new Request(url, { method: 'POST' })
    const response = new Response('{}', { status: 200 })
    const work = () => log(request, response, performance.now())
    timeOf(work) // warmed first, so the JIT has compiled it before it is timed
    const us = timeOf(work)
    batches.flush()
    return us
  } finally {
    closeSync(fd)
  }
}
