/**
 * Routes a client looks for where they are not: a 404 that says where the route is, not only
 * that there is none.
 * - An OpenAI-minded client on the native API, which has none (the native API's own words:
 *   "There is no /v1/files … Cancel is DELETE /batches/{id}, not POST /batches/{id}/cancel").
 * - An SDK given a base URL one segment off (the gateway's root, `/openai`, or `/v1` for
 *   Anthropic's SDK): the path it asks for names the mistake.
 * - A path one step off by hand: `/v1/batch` for `/v1/batches`, or `/v1` twice (a base URL or
 *   MULTIGRID_URL that already ends in it).
 */
import { refuse, type GatewayError } from '../errors.ts'
import { excerpt } from '../excerpt.ts'

const FILES = /^\/v1\/files(?:\/|$)/
const CANCEL = /^\/v1\/batches\/([^/]+)\/cancel$/
/** OpenAI's paths as an SDK asks for them below its base URL. */
const OPENAI_PATH =
  /^\/(?:openai\/)?(files|batches|chat\/completions|completions|embeddings|responses|models)(?:\/|$)/
/** Anthropic's, as its SDK asks for them below a base URL without /anthropic. */
const ANTHROPIC_PATH = /^(?:\/v1){0,2}\/messages(?:\/|$)/
const SINGULAR_BATCH = /^\/v1\/batch(?=\/|$)/
const V1_TWICE = /^\/v1\/v1(?:\/|$)/

/** The refusal of `method path` when it is such a route; null otherwise. */
export function misroutedRequest(method: string, path: string): GatewayError | null {
  if (FILES.test(path))
    return refuse(
      'unknown_route',
      `there is no ${excerpt(path)} on the native API: send the JSONL file itself as the body of POST /v1/batches, or use the base URL /openai/v1 with the OpenAI SDK, where files.create and batches.create work`,
    )
  const openai = OPENAI_PATH.exec(path)
  if (openai) return wrongBaseUrl(path, openai[1] === 'files' || openai[1] === 'batches')
  if (ANTHROPIC_PATH.test(path))
    return refuse(
      'unknown_route',
      `there is no ${excerpt(path)}: Anthropic's API is served under /anthropic, so give Anthropic's SDK the base URL <this gateway>/anthropic (it adds /v1/messages itself)`,
    )
  if (SINGULAR_BATCH.test(path))
    return refuse(
      'unknown_route',
      `there is no ${excerpt(path)}: did you mean ${excerpt(path.replace(SINGULAR_BATCH, '/v1/batches'))}?`,
    )
  if (V1_TWICE.test(path))
    return refuse(
      'unknown_route',
      `there is no ${excerpt(path)}: the path has /v1 twice, so the base URL it was asked under (MULTIGRID_URL, for the command line) already ends in /v1; give the command line and curl the gateway's address without it, and the OpenAI SDK <this gateway>/v1`,
    )
  const cancel = CANCEL.exec(path)
  if (cancel && method === 'POST')
    return refuse(
      'unknown_route',
      `the native API cancels a batch with DELETE /v1/batches/${excerpt(cancel[1])}; POST …/cancel is the OpenAI facade's, under /openai/v1`,
    )
  return null
}

/** An OpenAI path below a base URL without its /v1: the base URL to use instead. */
function wrongBaseUrl(path: string, facadeOnly: boolean): GatewayError {
  const where = facadeOnly
    ? "the base URL <this gateway>/openai/v1 (Files and Batches are the OpenAI facade's); with curl, the native API is POST /v1/batches, the JSONL file itself as the body"
    : 'the base URL <this gateway>/v1 (or <this gateway>/openai/v1, which also serves Files and Batches)'
  return refuse(
    'unknown_route',
    `there is no ${excerpt(path)}: the OpenAI SDK adds the path to its base URL, so give it ${where}`,
  )
}
