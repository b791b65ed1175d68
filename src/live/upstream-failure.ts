/** A live call's upstream failure as the refusal its caller gets (docs/errors.md). */
import type { UpstreamError } from '../../providers/types.ts'
import { refuse, type GatewayError } from '../errors.ts'

export function upstreamFailure(error: UpstreamError): GatewayError {
  const retryAfter: Record<string, string> = error.retryAfterMs
    ? { 'retry-after': String(Math.ceil(error.retryAfterMs / 1000)) }
    : {}
  switch (error.kind) {
    case 'rate_limited':
      return refuse('upstream_rate_limited', 'the provider is rate-limiting; retry later', {
        headers: retryAfter,
      })
    case 'busy':
      // At capacity, not failing (OpenAI's flex out of capacity, a full pool, Anthropic's 529):
      // the same call may well go through in a moment.
      return refuse(
        'upstream_busy',
        `the provider is at capacity; retry later (${error.message})`,
        {
          headers: retryAfter,
        },
      )
    case 'invalid_request':
    case 'context_length_exceeded':
      // No status: the adapter refused it before sending (a body its translation cannot carry,
      // providers/anthropic/convert-to-anthropic-messages.ts); the provider never saw it.
      if (error.status === null)
        return refuse(
          error.kind,
          `the gateway refused the request before sending it: ${error.message}`,
        )
      // The field the provider named (OpenAI's error.param), as it named it.
      return refuse(error.kind, `the provider refused the request: ${error.message}`, {
        param: upstreamParam(error.body),
      })
    case 'timeout':
      return refuse('upstream_timeout', 'the provider did not answer in time')
    case 'connection':
      // Unreachable, or no replica left to serve it: a pool down, not this request's fault.
      return refuse(
        'upstream_error',
        `the provider could not be reached (${error.message}); nothing was billed: retry in a moment, and if it lasts, tell the gateway's operator that the provider is down`,
      )
    case 'auth':
      // The gateway's own key for the provider: nothing the caller can change.
      return refuse(
        'upstream_error',
        `the provider refused the gateway's key for it (${error.message}); nothing was billed: tell the gateway's operator`,
      )
    default:
      return refuse(
        'upstream_error',
        `the provider failed: ${error.message}; nothing was billed: retry in a moment`,
      )
  }
}

function upstreamParam(body: unknown): string | null {
  const param = (body as { error?: { param?: unknown } } | null)?.error?.param
  return typeof param === 'string' ? param : null
}
