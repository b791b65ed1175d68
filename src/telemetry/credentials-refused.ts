/**
 * A provider that refuses the gateway's own credentials (401/403) is the operator's to fix, and
 * says nothing at info level otherwise (each line or call fails on its own): a warning, at most
 * once a minute per provider, naming the provider and never the key (docs/operations.md).
 */
import type { Logger } from './logger.ts'

const EVERY_MS = 60_000

/** The upstream-failure listener that warns; `kind` as classify-error.ts names it. */
export function warnCredentialsRefused(logger: Logger): (provider: string, kind: string) => void {
  const warnedAt = new Map<string, number>()
  return (provider, kind) => {
    if (kind !== 'auth') return
    const now = Date.now()
    if (now - (warnedAt.get(provider) ?? -Infinity) < EVERY_MS) return
    warnedAt.set(provider, now)
    logger.warn('upstream.credentials_refused', {
      provider,
      fix: "the provider answered 401 or 403 to the gateway's API key: set a valid key in the variable its api_key_env names, then restart",
    })
  }
}
