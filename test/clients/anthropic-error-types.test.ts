/**
 * Refusals under /anthropic carry Anthropic's error type for their status (its API reference,
 * "Errors"), which its SDK and its users' handlers switch on.
 */
import { expect, test } from 'bun:test'
import { refuse } from '../../src/errors.ts'
import { anthropicErrorType } from '../../src/http/anthropic/anthropic-errors.ts'

test("each status gets Anthropic's type for it", () => {
  const cases: [Parameters<typeof refuse>[0], string][] = [
    ['invalid_request', 'invalid_request_error'],
    ['invalid_api_key', 'authentication_error'],
    ['insufficient_quota', 'billing_error'],
    ['not_found', 'not_found_error'],
    ['request_too_large', 'request_too_large'],
    ['rate_limit_exceeded', 'rate_limit_error'],
    ['upstream_error', 'api_error'],
    ['upstream_busy', 'overloaded_error'],
    // A 504: Anthropic's timeout_error, not api_error.
    ['upstream_timeout', 'timeout_error'],
    // A 409 (cancelling an ended batch, deleting a running one): the SDK's conflict_error.
    ['batch_not_cancellable', 'conflict_error'],
    ['batch_not_ended', 'conflict_error'],
  ]
  for (const [code, type] of cases)
    expect([code, anthropicErrorType(refuse(code, 'x'))]).toEqual([code, type])
})
