/**
 * Numbers written as text (query parameters, form fields, "24h"): plain decimal digits only.
 * `Number()` and `z.coerce.number()` read "0x10" as 16, "1e2" as 100, " 24" and "" as 24 and 0,
 * so a typo or a probe became a real setting; here each of those is refused with what to write.
 */
import { z } from 'zod'

/** No sign, no leading zero, no spaces, no exponent, no hex: what a person means by "24". */
const DECIMAL = /^(0|[1-9][0-9]{0,14})$/

/** The value of `text` when it is a plain decimal integer in [min, max], else null. */
export function parseWholeNumber(text: string, min: number, max: number): number | null {
  if (!DECIMAL.test(text)) return null
  const value = Number(text)
  return value >= min && value <= max ? value : null
}

/**
 * The refusal a text field gets, as a custom zod issue that carries its own wording: describeZodIssue
 * turns `expected` and `example` into "must be …; got …" and "set … to …, such as …".
 */
export function refuse(
  ctx: z.core.$RefinementCtx<string>,
  text: string,
  expected: string,
  example: string,
) {
  ctx.issues.push({
    code: 'custom',
    input: text,
    message: `must be ${expected}`,
    params: { expected, example },
  })
  return z.NEVER
}

/** A query or form value that must be a whole number from `min` to `max`, such as `example`. */
export function wholeNumberText(min: number, max: number, example: number) {
  const expected = `a whole number from ${min} to ${max} in decimal digits`
  // The description is what GET /openapi.json says of the parameter; the check is the transform.
  return z
    .string()
    .describe(expected)
    .transform(
      (text, ctx) =>
        parseWholeNumber(text, min, max) ?? refuse(ctx, text, expected, String(example)),
    )
}

/** The longest completion window, in hours (docs/native-api.md: 1–168). */
export const MAX_WINDOW_HOURS = 168

/** A completion window in the OpenAI form, "24h": N hours, N a whole number from 1 to 168. */
const hoursText = () => z.string().describe(`"Nh": N hours, N from 1 to ${MAX_WINDOW_HOURS}`)
export const windowHoursText = () =>
  hoursText().transform((text, ctx) => {
    const hours = text.endsWith('h')
      ? parseWholeNumber(text.slice(0, -1), 1, MAX_WINDOW_HOURS)
      : null
    return (
      hours ??
      refuse(
        ctx,
        text,
        `"24h" or another "Nh" with N a whole number from 1 to ${MAX_WINDOW_HOURS}`,
        '"24h"',
      )
    )
  })
