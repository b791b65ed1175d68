/**
 * Text that every store can keep: no NUL (PostgreSQL text cannot hold U+0000) and no lone UTF-16
 * surrogate ("\ud800" in JSON is valid JSON but not Unicode; jsonb refuses it). With the `u`
 * flag a surrogate class matches only unpaired halves, so emoji and other astral characters pass.
 * The one statement of that rule: input is refused by it here, and values from outside that are
 * recorded anyway (an upstream's error message) are made storable by `toStorable`.
 */
import { z } from 'zod'

const UNSTORABLE_CHARACTERS = '\\u0000\\uD800-\\uDFFF'

export const STORABLE_TEXT = new RegExp(`^[^${UNSTORABLE_CHARACTERS}]*$`, 'u')
const UNSTORABLE = new RegExp(`[${UNSTORABLE_CHARACTERS}]`, 'u')
const UNSTORABLE_ALL = new RegExp(`[${UNSTORABLE_CHARACTERS}]`, 'gu')

export const storableText = () =>
  z
    .string()
    .regex(STORABLE_TEXT, 'must be Unicode text without NUL characters or unpaired surrogates')

/** `text` with each character no store can keep replaced by U+FFFD; the same string when none. */
export const toStorable = (text: string): string =>
  UNSTORABLE.test(text) ? text.replace(UNSTORABLE_ALL, '\uFFFD') : text

/**
 * Whether `text` has at most `max` characters, counted as code points, as a custom_id's are (by
 * the line schema's JSON Schema): an emoji is one character, not two UTF-16 units.
 */
export function charactersAtMost(text: string, max: number): boolean {
  if (text.length <= max) return true
  let count = 0
  for (const _ of text) if (++count > max) return false
  return true
}
