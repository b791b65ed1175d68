/**
 * Amounts of USD written by a caller (docs/money-and-limits.md `max_cost_usd`): plain decimal notation, more than
 * zero, kept exact as canonical decimal text. "5", "0.25", "12.000001"; not "-1", "0", "1e3",
 * "$5" or " 5". A JSON number (the OpenAI SDKs' extra_body may send one) is read the same way.
 */
import { z } from 'zod'
import { Money, moneyText } from '../money/decimal.ts'
import { refuse } from './whole-number.ts'

const DECIMAL = /^(0|[1-9][0-9]{0,11})(\.[0-9]{1,18})?$/
const EXPECTED =
  'a decimal amount of USD greater than 0 and below 1000000000000, in plain notation with no extra leading zero ("0.25", not "00.25" or "007")'
const EXAMPLE = '"5" or "0.25"'

/** The canonical text of a positive decimal amount, or null. */
export function parsePositiveUsd(text: string): string | null {
  if (!DECIMAL.test(text)) return null
  const value = new Money(text)
  return value.isPositive() && !value.isZero() ? moneyText(value) : null
}

/** A spend cap as a query or form value. */
export const maxCostUsdText = () =>
  z
    .string()
    .describe(EXPECTED)
    .transform((text, ctx) => parsePositiveUsd(text) ?? refuse(ctx, text, EXPECTED, EXAMPLE))

/** A spend cap in a JSON body: a decimal string, or a number written in plain notation. */
export const maxCostUsdJson = () =>
  z.union([z.string(), z.number()]).transform((value, ctx) => {
    const text = typeof value === 'number' ? String(value) : value
    return (
      parsePositiveUsd(text) ??
      refuse(ctx as z.core.$RefinementCtx<string>, text, EXPECTED, EXAMPLE)
    )
  })
