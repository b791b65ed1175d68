/**
 * Errors under /anthropic in Anthropic's shape (docs/clients/anthropic-sdk.md): `{"type": "error", "error": {"type",
 * "message"}}`, with the same status the native refusal has. The native `code` and `param` stay
 * inside `error`, and extra top-level fields (a batch's `issues`) beside it: Anthropic's SDK
 * reads only `error.type` and `error.message`, so more does no harm and says more.
 */
import { GatewayError, invalidApiKey, refuse, type ErrorType } from '../../errors.ts'
import { excerpt } from '../../excerpt.ts'

/** The gateway's error types → Anthropic's (their API reference, "Errors"). */
const TYPES: Record<ErrorType, string> = {
  invalid_request_error: 'invalid_request_error',
  authentication_error: 'authentication_error',
  permission_error: 'permission_error',
  not_found_error: 'not_found_error',
  rate_limit_error: 'rate_limit_error',
  insufficient_quota: 'billing_error',
  conflict_error: 'conflict_error',
  server_error: 'api_error',
}

export function anthropicErrorType(error: GatewayError): string {
  if (error.status === 413) return 'request_too_large'
  // Anthropic pairs every 404 with not_found_error, an unknown model's too, where OpenAI (and so
  // the gateway's own type) says invalid_request_error.
  if (error.status === 404) return 'not_found_error'
  // A state that refuses the call (cancelling an ended batch, deleting a running one): the SDK's
  // conflict_error, whatever OpenAI's type for it.
  if (error.status === 409) return 'conflict_error'
  // Anthropic's own word for a service at capacity (its 529), and for its 504.
  if (error.refusal === 'upstream_busy') return 'overloaded_error'
  if (error.status === 504) return 'timeout_error'
  return TYPES[error.type]
}

/** A refusal rendered for an Anthropic client. */
export function anthropicErrorResponse(
  refusal: GatewayError,
  headers: Record<string, string>,
): Response {
  const { error: inner, ...extra } = refusal.toBody()
  const body = {
    type: 'error',
    error: { ...inner, type: anthropicErrorType(refusal), message: refusal.message },
    ...extra,
  }
  return new Response(JSON.stringify(body), {
    status: refusal.status,
    headers: { ...headers, 'content-type': 'application/json', ...refusal.ownHeaders() },
  })
}

/**
 * Runs a handler, answering its refusals in Anthropic's shape. Anything else is a bug: it goes on
 * to the application's handler (app.ts), which logs it and answers 500.
 */
export async function inAnthropicShape(
  headers: Record<string, string>,
  handler: () => Promise<unknown>,
): Promise<unknown> {
  try {
    return await handler()
  } catch (error) {
    if (error instanceof GatewayError) return anthropicErrorResponse(error, headers)
    throw error
  }
}

/** A route under /anthropic that does not exist: the refusal names the routes there are. */
export const unknownAnthropicRoute = (request: Request, path: string) =>
  refuse(
    'unknown_route',
    `no route for ${excerpt(request.method)} ${excerpt(path)}; this gateway's Anthropic API serves /anthropic/v1/messages, /anthropic/v1/messages/count_tokens, /anthropic/v1/messages/batches and /anthropic/v1/models`,
  )

/** The caller's key: Anthropic's `x-api-key` header, or a Bearer key as every other surface takes. */
export function anthropicAuthorization(request: Request): string {
  const key = request.headers.get('x-api-key')
  if (key) return `Bearer ${key}`
  const authorization = request.headers.get('authorization')
  if (!authorization)
    throw invalidApiKey('no API key: send "x-api-key: <key>" (or "Authorization: Bearer <key>")')
  return authorization
}
