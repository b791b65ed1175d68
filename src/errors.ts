/**
 * One error envelope everywhere (docs/errors.md): `{"error": {"message", "type", "param", "code"}}`.
 * A GatewayError is an expected refusal; anything else reaching the HTTP layer is a bug and is
 * answered 500 without details. Every refusal is named in REFUSALS below, the one place that says
 * which HTTP status and error type each code is answered with.
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'insufficient_quota'
  | 'conflict_error'
  | 'server_error'

export interface ErrorBody {
  error: {
    message: string
    type: ErrorType
    param: string | null
    code: string | null
    [extra: string]: unknown
  }
  [extra: string]: unknown
}

interface RefusalKind {
  status: number
  type: ErrorType
  /** The code on the wire, when it is not the refusal's own name. */
  code?: string
}

/** Every refusal by its code (the wire's `error.code`): the status and type it is answered with. */
export const REFUSALS = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  invalid_batch_file: { status: 400, type: 'invalid_request_error' },
  wrong_api_surface: { status: 400, type: 'invalid_request_error' },
  request_aborted: { status: 400, type: 'invalid_request_error' },
  /** A retry of a batch whose every line succeeded (docs/events-and-webhooks.md). */
  nothing_to_retry: { status: 400, type: 'invalid_request_error' },
  /** The provider refused a live request as too long for the model. */
  context_length_exceeded: { status: 400, type: 'invalid_request_error' },
  /**
   * A body that is itself gzip data (its first bytes), not one sent with Content-Encoding: the
   * content is wrong, not its transport, so 400 under the same code as the 415 below.
   */
  compressed_body: { status: 400, type: 'invalid_request_error', code: 'unsupported_encoding' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  invalid_admin_token: { status: 401, type: 'authentication_error' },
  insufficient_quota: { status: 402, type: 'insufficient_quota' },
  insufficient_permissions: { status: 403, type: 'permission_error' },
  not_found: { status: 404, type: 'not_found_error' },
  /** A live call naming a model the caller cannot use: unknown, another account's or inactive `ft:` id. */
  model_not_found: { status: 404, type: 'invalid_request_error' },
  unknown_route: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  upload_timeout: { status: 408, type: 'invalid_request_error' },
  batch_not_cancellable: { status: 409, type: 'invalid_request_error' },
  /** A retry of a batch that is still running (docs/events-and-webhooks.md). */
  batch_not_ended: { status: 409, type: 'invalid_request_error' },
  /** A fine-tune registered again under the same base model and name. */
  adapter_exists: { status: 409, type: 'conflict_error' },
  results_expired: { status: 410, type: 'invalid_request_error' },
  request_too_large: { status: 413, type: 'invalid_request_error' },
  file_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_encoding: { status: 415, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  /** An Idempotency-Key sent again with another request than the one that made its batch. */
  idempotency_key_reused: { status: 422, type: 'invalid_request_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  limit_exceeded: { status: 429, type: 'rate_limit_error' },
  upstream_rate_limited: { status: 429, type: 'rate_limit_error' },
  internal_error: { status: 500, type: 'server_error' },
  upstream_error: { status: 502, type: 'server_error' },
  upstream_timeout: { status: 504, type: 'server_error' },
  not_ready: { status: 503, type: 'server_error' },
  /** The store (PostgreSQL) could not be reached while the request was served: nothing was done. */
  store_unavailable: { status: 503, type: 'server_error' },
  /** A live call whose last offering answered busy (a full pool's 503, flex out of capacity, 529). */
  upstream_busy: { status: 503, type: 'server_error' },
} as const satisfies Record<string, RefusalKind>

export type RefusalCode = keyof typeof REFUSALS

export interface RefusalOptions {
  param?: string | null
  /** Extra fields inside `error` (e.g. `limit`). */
  detail?: Record<string, unknown>
  /** Extra top-level fields (e.g. `issues`). */
  extra?: Record<string, unknown>
  headers?: Record<string, string>
}

export class GatewayError extends Error {
  readonly status: number
  readonly type: ErrorType
  /** The wire's `error.code`. */
  readonly code: string

  constructor(
    /** Which refusal this is (REFUSALS). */
    readonly refusal: RefusalCode,
    message: string,
    readonly options: RefusalOptions = {},
  ) {
    super(message)
    const kind: RefusalKind = REFUSALS[refusal]
    this.status = kind.status
    this.type = kind.type
    this.code = kind.code ?? refusal
  }

  toBody(): ErrorBody {
    return {
      error: {
        message: this.message,
        type: this.type,
        param: this.options.param ?? null,
        code: this.code,
        ...this.options.detail,
      },
      ...this.options.extra,
    }
  }

  /**
   * Its own headers. A 409 says `x-should-retry: false`: here it means the state of what the call
   * names forbids it (a batch that has ended, or not yet; an adapter that exists), which asking
   * again in a second does not change, and the OpenAI and Anthropic SDKs retry a 409 (a lock
   * timeout, to them) unless told not to. So does a 429 `limit_exceeded`: an account's limit (the
   * day's spend, open batches, files, open streams) is not freed by the SDKs' backoff of a second
   * or two, where the per-minute rate limit's 429 is, with its Retry-After.
   */
  ownHeaders(): Record<string, string> {
    const final =
      this.status === 409 || this.code === 'limit_exceeded'
        ? { 'x-should-retry': 'false' }
        : undefined
    return { ...final, ...this.options.headers }
  }

  /** The refusal as a JSON answer; `headers` are the route's own (rate-limit counters, …). */
  toResponse(headers: Record<string, string> = {}): Response {
    return new Response(JSON.stringify(this.toBody()), {
      status: this.status,
      headers: { ...headers, 'content-type': 'application/json', ...this.ownHeaders() },
    })
  }
}

/** A refusal by its code: `refuse('results_expired', 'the results of …')`. */
export const refuse = (code: RefusalCode, message: string, options?: RefusalOptions) =>
  new GatewayError(code, message, options)

export const badRequest = (
  message: string,
  param: string | null = null,
  code: Extract<
    RefusalCode,
    'invalid_request' | 'wrong_api_surface' | 'compressed_body'
  > = 'invalid_request',
) => refuse(code, message, { param })

export const notFound = (what: string) => refuse('not_found', `${what} not found`)

export const invalidApiKey = (message = 'missing or invalid API key') =>
  refuse('invalid_api_key', message)

export const insufficientPermissions = (scope: string) =>
  refuse('insufficient_permissions', `this key lacks the "${scope}" scope; create a key with it`)
