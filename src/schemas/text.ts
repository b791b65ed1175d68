/**
 * Text that every store can keep: no NUL (PostgreSQL text cannot hold U+0000) and no lone UTF-16
 * surrogate ("\ud800" in JSON is valid JSON but not Unicode; jsonb refuses it). With the `u`
 * flag a surrogate class matches only unpaired halves, so emoji and other astral characters pass.
 */
import { z } from 'zod'

export const STORABLE_TEXT = /^[^\u0000\uD800-\uDFFF]*$/u

export const storableText = () =>
  z.string().regex(STORABLE_TEXT, 'must be Unicode text without NUL characters or unpaired surrogates')
