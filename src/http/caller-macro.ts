/**
 * Authentication for a route group, written once. A group that uses `callerMacro(auth)` gives its
 * routes a `caller` option naming the scope they need; such a route's handler is handed `caller`
 * (the key and its account, found and counted by auth/authenticate.ts: 401, 429, 403) and
 * `answerHeaders` (the answer's headers, already carrying the X-RateLimit-* ones) before it runs, and
 * never runs for a refused key. Nothing of the request is read first but its headers, so a body
 * is never read for a caller who may not send it.
 */
import { Elysia } from 'elysia'
import type { Authenticator, Caller } from '../auth/authenticate.ts'
import type { Scope } from '../domain.ts'
import { GatewayError } from '../errors.ts'

export type { Caller }

/**
 * The answer's headers as the rest of the gateway writes them. Elysia types `set.headers` with
 * numbers allowed too; the gateway writes only strings there, so this is the one place it is
 * seen as a plain string map.
 */
export function responseHeaders(set: { headers: unknown }): Record<string, string> {
  return set.headers as Record<string, string>
}

/** The usual `Authorization: Bearer <key>` header. */
export const bearerAuthorization = (request: Request) => request.headers.get('authorization')

export interface CallerMacroOptions {
  /** Where the key is read from: the Authorization header, or a surface's own (x-api-key). */
  authorization?: (request: Request) => string | null
  /**
   * A surface that answers refusals in its own shape (Anthropic's) renders them here; otherwise
   * a refusal goes on to the application's error handler (app.ts).
   */
  refusal?: (error: GatewayError, headers: Record<string, string>) => Response
}

export function callerMacro(auth: Authenticator, options: CallerMacroOptions = {}) {
  const authorizationOf = options.authorization ?? bearerAuthorization
  return new Elysia().macro({
    caller: (need: Scope | 'any') => ({
      async resolve({ request, set, status }) {
        const headers = responseHeaders(set)
        let caller: Caller
        try {
          caller = await auth.authenticate(authorizationOf(request), need, headers)
        } catch (error) {
          if (options.refusal && error instanceof GatewayError)
            return status(error.status, options.refusal(error, headers))
          throw error
        }
        return { caller, answerHeaders: headers }
      },
    }),
  })
}
