/**
 * Whether an Authorization header carries `expected` as its Bearer token, compared in constant
 * time (a token compared byte by byte as it arrives tells a prober how much of it was right). The
 * scheme is case-insensitive (RFC 9110 §11.1), for user keys (authenticate.ts) as for the tokens.
 */
import { timingSafeEqual } from 'node:crypto'

/** The token of `Authorization: Bearer <token>`, or null for another header or none. */
export const bearerToken = (authorization: string | null): string | null =>
  (authorization ? /^bearer\s+(\S+)\s*$/i.exec(authorization) : null)?.[1] ?? null

export function bearerTokenMatches(authorization: string | null, expected: Buffer): boolean {
  const given = Buffer.from(bearerToken(authorization) ?? '')
  return given.length === expected.length && timingSafeEqual(given, expected)
}
