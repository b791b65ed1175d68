/** Refusals as values: one code → status/type table, rendered by `toResponse()` and by admission's union. */
import { describe, expect, test } from 'bun:test'
import { refusalOf } from '../../src/admission/submit-batch.ts'
import { GatewayError, REFUSALS, refuse } from '../../src/errors.ts'

describe('refusals', () => {
  test('every refusal takes its status and type from the one table', () => {
    for (const code of Object.keys(REFUSALS) as (keyof typeof REFUSALS)[]) {
      const refusal = refuse(code, 'm')
      expect(refusal).toBeInstanceOf(GatewayError)
      expect(refusal.status).toBe(REFUSALS[code].status)
      expect(refusal.type).toBe(REFUSALS[code].type)
    }
    // The one refusal whose wire code is another's: a body that is itself gzip data is 400, a
    // Content-Encoding is 415, both `unsupported_encoding` as the SPEC's tests expect.
    expect(refuse('compressed_body', 'm').code).toBe('unsupported_encoding')
    expect(refuse('compressed_body', 'm').status).toBe(400)
    expect(refuse('unsupported_encoding', 'm').status).toBe(415)
  })

  test('toResponse answers the docs/errors.md envelope with the route’s headers and the refusal’s own', async () => {
    const refusal = refuse('rate_limit_exceeded', 'slow down', {
      param: 'p',
      detail: { limit: 1 },
      extra: { issues: [] },
      headers: { 'retry-after': '3' },
    })
    const response = refusal.toResponse({ 'x-ratelimit-limit': '1' })
    expect(response.status).toBe(429)
    expect(response.headers.get('content-type')).toBe('application/json')
    expect(response.headers.get('retry-after')).toBe('3')
    expect(response.headers.get('x-ratelimit-limit')).toBe('1')
    expect(await response.json()).toEqual({
      error: {
        message: 'slow down',
        type: 'rate_limit_error',
        param: 'p',
        code: 'rate_limit_exceeded',
        limit: 1,
      },
      issues: [],
    })
  })

  test('an admission refusal is a value, rendered in the words of docs/money-and-limits.md', () => {
    const quota = refusalOf({
      kind: 'insufficient_quota',
      costCeilingUsd: '2.000000',
      availableUsd: '1.000000',
    })
    expect(quota.toBody()).toEqual({
      error: {
        message:
          "the batch's cost ceiling of $2.000000 exceeds the account's available credit of $1.000000; add credit, set a max_cost_usd the credit covers, or submit fewer lines or a lower max_tokens",
        type: 'insufficient_quota',
        param: null,
        code: 'insufficient_quota',
        cost_ceiling_usd: '2.000000',
        available_usd: '1.000000',
      },
    })
    // Under a cap below the ceiling, the cap is what was to be held, and what to lower.
    const capped = refusalOf({
      kind: 'insufficient_quota',
      costCeilingUsd: '2.000000',
      availableUsd: '1.000000',
      maxCostUsd: '1.500000',
    })
    expect(capped.toBody().error).toMatchObject({
      message:
        "the batch's max_cost_usd of $1.500000 (held instead of its cost ceiling of $2.000000) exceeds the account's available credit of $1.000000; add credit or set a lower max_cost_usd",
      code: 'insufficient_quota',
      cost_ceiling_usd: '2.000000',
      max_cost_usd: '1.500000',
      available_usd: '1.000000',
    })
    const limit = refusalOf({ kind: 'limit_exceeded', limit: 10, inUse: 10 })
    expect(limit.status).toBe(429)
    expect(limit.toBody().error.limit).toEqual({ open_batches: 10, in_use: 10 })
    expect(limit.toBody().error.message).toStartWith('the account already has 10 open batches,')
    const one = refusalOf({ kind: 'limit_exceeded', limit: 1, inUse: 1 })
    expect(one.toBody().error.message).toStartWith('the account already has 1 open batch,')
  })
})
