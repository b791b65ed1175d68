/**
 * One error envelope everywhere (SPEC §11): `{"error": {"message", "type", "param", "code"}}`.
 * A GatewayError is an expected refusal; anything else reaching the HTTP layer is a bug and is
 * answered 500 without details.
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

export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string | null,
    message: string,
    readonly options: {
      param?: string | null
      /** Extra fields inside `error` (e.g. `limit`). */
      detail?: Record<string, unknown>
      /** Extra top-level fields (e.g. `issues`). */
      extra?: Record<string, unknown>
      headers?: Record<string, string>
    } = {},
  ) {
    super(message)
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
}

export const badRequest = (message: string, param: string | null = null, code = 'invalid_request') =>
  new GatewayError(400, 'invalid_request_error', code, message, { param })

export const notFound = (what: string) =>
  new GatewayError(404, 'not_found_error', 'not_found', `${what} not found`)

export const invalidApiKey = (message = 'missing or invalid API key') =>
  new GatewayError(401, 'authentication_error', 'invalid_api_key', message)

export const insufficientPermissions = (scope: string) =>
  new GatewayError(
    403,
    'permission_error',
    'insufficient_permissions',
    `this key lacks the "${scope}" scope; create a key with it`,
  )
