/**
 * A batch line's answer, made the way the live endpoint would answer the same body, so a line's
 * usage inside a provider batch is the usage it would have had live (docs/batch-lanes.md, docs/pricing.md).
 */
import { prepareMessages } from './anthropic-routes.ts'
import type { JobLine } from './batch-jobs.ts'
import { prepareChat, prepareEmbeddings } from './openai-routes.ts'
import { prepareResponses } from './responses-routes.ts'
import type { ResolvedSimulatorOptions } from './options.ts'
import { errorBody, type Dialect } from './respond.ts'

/** A `[sim:batch-invalid]` marker in a line's prompt makes that line a 400 invalid_request. */
const INVALID_MARKER = '[sim:batch-invalid]'

/** One request of a provider batch, as its job read it. */
export interface BatchLineRequest {
  dialect: Dialect
  /** The job's endpoint (`/v1/chat/completions`, `/v1/embeddings`, `/v1/messages`). */
  endpoint: string
  customId: string
  body: Record<string, unknown>
  /** The id its answer carries (`chatcmpl-…`, `msg_…`). */
  id: string
}

/** One line's answer: a 200 with the live body, or an error status with the live envelope. */
export async function answerLine(
  { dialect, endpoint, customId, body, id }: BatchLineRequest,
  options: ResolvedSimulatorOptions,
  draw: () => number,
): Promise<JobLine> {
  // Drawn first and always, so one seed fails the same lines whatever their bodies.
  const serverError = draw() < options.batchErrorRate
  const model = typeof body.model === 'string' ? body.model : ''
  if (model.startsWith('fail-400') || JSON.stringify(body).includes(INVALID_MARKER)) {
    const message = `The simulator refuses this request (model '${model}')`
    const type = 'invalid_request_error'
    return {
      customId,
      status: 400,
      body: errorBody(dialect, { type, message, code: 'invalid_value' }),
    }
  }
  if (serverError) {
    const type = dialect === 'openai' ? 'server_error' : 'api_error'
    const message = 'The server had an error processing this request (simulated)'
    return { customId, status: 500, body: errorBody(dialect, { type, message }) }
  }
  // A batch line never streams: the stream flag is dropped as the providers require.
  const { stream: _stream, ...plain } = body
  const prepared =
    dialect === 'anthropic'
      ? prepareMessages(plain, id, options.usageFactor, options.structuredAnswers)
      : endpoint === '/v1/embeddings'
        ? prepareEmbeddings(plain, options.embeddingDims)
        : endpoint === '/v1/responses'
          ? prepareResponses(plain, id, options.usageFactor, options.structuredAnswers)
          : prepareChat(plain, id, options)
  if (prepared instanceof Response) {
    return { customId, status: prepared.status, body: await prepared.json() }
  }
  // Without usage at the set rate, as the live endpoints answer (drawn only when set).
  const noUsage = options.noUsageRate > 0 && draw() < options.noUsageRate
  return { customId, status: 200, body: JSON.parse(prepared.build(noUsage).text) }
}
