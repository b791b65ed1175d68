/**
 * What every authenticated request passes: who is calling (401), how often (429, with the
 * X-RateLimit-* headers on every authenticated answer, refusals included), and may they (403).
 */
import type { AccountRecord, KeyRecord, Scope } from '../domain.ts'
import { insufficientPermissions, invalidApiKey, refuse } from '../errors.ts'
import type { RateLimiter } from '../limits/rate-limiter.ts'
import type { AccountStore } from '../store/store.ts'
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.ts'
import type { KeyCache } from './key-cache.ts'
import { hashKey, KEY_PREFIX } from './keys.ts'
import { bearerToken } from './bearer-token.ts'

export interface Caller {
  key: KeyRecord
  account: AccountRecord
}

export interface Authenticator {
  /**
   * Finds the key, counts the request and checks the scope. `headers` receives the rate-limit
   * headers, so the caller's response carries them whatever happens next.
   */
  authenticate(
    authorization: string | null,
    need: Scope | 'any',
    headers: Record<string, string>,
  ): Promise<Caller>
  /**
   * The same count and scope check for a caller found another way (a dashboard session, whose
   * lookup already refused unknown, expired and revoked ones).
   */
  authorize(caller: Caller, need: Scope | 'any', headers: Record<string, string>): Promise<Caller>
  /**
   * Whether the key a request was authenticated with is still good (not revoked, on any
   * instance): asked again by a long-lived answer such as a progress stream. Counts nothing.
   */
  stillValid(authorization: string | null, keyId: string): Promise<boolean>
}

/** `keys` (key-cache.ts) answers lookups from memory; without it every request asks the store. */
export function createAuthenticator(
  store: AccountStore,
  limiter: RateLimiter,
  telemetry: Telemetry = noTelemetry,
  keys?: KeyCache,
): Authenticator {
  const findKey = keys ? keys.find : (hash: string) => store.findKey(hash)
  /** The rate limit and scope check, for a caller already authenticated. */
  async function authorize(
    found: Caller,
    need: Scope | 'any',
    headers: Record<string, string>,
  ): Promise<Caller> {
    const limit = found.key.rateLimitPerMinute ?? found.account.rateLimitPerMinute
    const decision = await limiter.hit(found.key.id, limit)
    headers['x-ratelimit-limit'] = String(decision.limit)
    headers['x-ratelimit-remaining'] = String(decision.remaining)
    headers['x-ratelimit-reset'] = String(decision.resetSeconds)
    if (!decision.allowed) {
      telemetry.rateLimited('requests_per_minute')
      throw refuse(
        'rate_limit_exceeded',
        `rate limit of ${decision.limit} requests per minute reached; retry in ${decision.resetSeconds} s`,
        { headers: { 'retry-after': String(decision.resetSeconds) } },
      )
    }
    const scopes = found.key.scopes
    // `read` is satisfied by any key that may also write.
    const allowed =
      need === 'any' ||
      (need === 'read'
        ? scopes.includes('read') || scopes.includes('batches')
        : scopes.includes(need))
    if (!allowed) throw insufficientPermissions(need)
    return found
  }

  return {
    async stillValid(authorization, keyId) {
      const token = bearerToken(authorization)
      if (!token?.startsWith(KEY_PREFIX)) return false
      const found = await findKey(hashKey(token))
      return found !== null && found.key.id === keyId && found.key.revokedAt === null
    },
    async authenticate(authorization, need, headers) {
      if (!authorization) throw invalidApiKey('no API key: send "Authorization: Bearer <key>"')
      const token = bearerToken(authorization)
      if (token === null)
        throw invalidApiKey('malformed Authorization header: send "Authorization: Bearer <key>"')
      // Another service's key (an OpenAI sk-…, the admin token) is told apart from one of ours.
      if (!token.startsWith(KEY_PREFIX))
        throw invalidApiKey(
          `that is not a Multigrid API key (they start with ${KEY_PREFIX}): send one made for your account (mg keys create)`,
        )
      const found = await findKey(hashKey(token))
      if (!found) throw invalidApiKey('unknown or revoked API key')
      return authorize(found, need, headers)
    },
    authorize,
  }
}
