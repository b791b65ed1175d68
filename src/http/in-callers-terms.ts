/**
 * A refusal of the chat body a request in a provider's own API translates to (its validation,
 * the hold), told in the names of the API the caller called: the Responses API's
 * max_output_tokens and input (responses-line.ts), the Messages API's own fields
 * (providers/anthropic/messages-path.ts), never the chat fields the caller never sent.
 */
import { GatewayError } from '../errors.ts'
import type { CallersNames } from '../ingest/callers-names.ts'

export type { CallersNames }

/** `error` with its message and param in the caller's names; anything else as it is. */
export function inCallersTerms(error: unknown, names: CallersNames): unknown {
  if (!(error instanceof GatewayError)) return error
  const { param } = error.options
  return new GatewayError(error.refusal, names.text(error.message), {
    ...error.options,
    param: param ? names.param(param) : param,
  })
}
