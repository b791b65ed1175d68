/**
 * A short excerpt of a caller's value, for refusals that name it. A refusal must not be a mirror:
 * a 1 MB custom_id or model name once came back whole, in a 1 MB answer. Every message or fix
 * that embeds a value the caller sent goes through here.
 */

/** Characters of a value kept in a message. */
export const EXCERPT_CHARS = 64

/**
 * `text` itself when it has at most `max` characters (UTF-16 units), otherwise its first `max`
 * followed by "…" and the full length, so the caller can still tell which value is meant.
 */
export function excerpt(text: string, max = EXCERPT_CHARS): string {
  if (text.length <= max) return text
  let end = max
  // Never cut a surrogate pair in half: a lone half is not Unicode and PostgreSQL refuses it.
  const last = text.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end--
  return `${text.slice(0, end)}… (${text.length} characters)`
}
