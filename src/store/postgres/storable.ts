/**
 * PostgreSQL refuses U+0000 in text and unpaired UTF-16 surrogates in jsonb ("\ud800" is valid
 * JSON, not valid Unicode). Values that reach the database from outside (an upstream's error
 * message, metadata, a model name quoted in an error) are made storable here, each bad character
 * replaced with U+FFFD (src/schemas/text.ts, the one statement of the rule), rather than failing
 * the transaction that records them.
 */
import type postgres from 'postgres'
import { toStorable } from '../../schemas/text.ts'

export function storableString<T extends string | null>(value: T): T {
  return (value === null ? value : toStorable(value)) as T
}

export function storableJson(value: unknown): postgres.JSONValue {
  if (typeof value === 'string') return storableString(value)
  if (Array.isArray(value)) return value.map(storableJson)
  if (value && typeof value === 'object') {
    const out: Record<string, postgres.JSONValue> = {}
    for (const [key, item] of Object.entries(value)) out[storableString(key)] = storableJson(item)
    return out
  }
  return value as postgres.JSONValue
}
