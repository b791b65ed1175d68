/**
 * The one retry policy. Exponential backoff with full jitter (AWS's "full jitter": a uniform draw
 * below the capped exponential), never sooner than the upstream's Retry-After.
 */
import type { UpstreamError } from '../../providers/types.ts'

export interface RetryPolicy {
  maxAttempts: number
  baseMs: number
  maxMs: number
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 8, baseMs: 250, maxMs: 30_000 }

/** Milliseconds to wait before attempt `attempts + 1`, or null when the line should fail now. */
export function retryDelay(
  policy: RetryPolicy,
  error: UpstreamError,
  attempts: number,
  random = Math.random,
): number | null {
  if (!error.retryable || attempts >= policy.maxAttempts) return null
  const exponential = Math.min(policy.maxMs, policy.baseMs * 2 ** (attempts - 1))
  const jittered = Math.floor(random() * exponential)
  return Math.max(jittered, error.retryAfterMs ?? 0)
}
