/**
 * Routes an OpenAI-minded client looks for on the native API, which has none: a 404 that says
 * where the route is, not only that there is none (the native API's own words: "There is no
 * /v1/files … Cancel is DELETE /batches/{id}, not POST /batches/{id}/cancel").
 */
import { refuse, type GatewayError } from '../errors.ts'
import { excerpt } from '../excerpt.ts'

const FILES = /^\/v1\/files(?:\/|$)/
const CANCEL = /^\/v1\/batches\/([^/]+)\/cancel$/

/** The refusal of `method path` when it is such a route; null otherwise. */
export function misroutedRequest(method: string, path: string): GatewayError | null {
  if (FILES.test(path))
    return refuse(
      'unknown_route',
      `there is no ${excerpt(path)} on the native API: send the JSONL file itself as the body of POST /v1/batches, or use the base URL /openai/v1 with the OpenAI SDK, where files.create and batches.create work`,
    )
  const cancel = CANCEL.exec(path)
  if (cancel && method === 'POST')
    return refuse(
      'unknown_route',
      `the native API cancels a batch with DELETE /v1/batches/${excerpt(cancel[1])}; POST …/cancel is the OpenAI facade's, under /openai/v1`,
    )
  return null
}
