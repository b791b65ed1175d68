/** API keys: 32 random bytes, shown once, stored as SHA-256 (the key has full entropy, so a fast hash is safe). */
import { createHash, randomBytes } from 'node:crypto'

export const KEY_PREFIX = 'mg_'

export function generateKey(): { key: string; hash: string; prefix: string } {
  const key = KEY_PREFIX + randomBytes(32).toString('base64url')
  return { key, hash: hashKey(key), prefix: key.slice(0, 9) }
}

export const hashKey = (key: string) => createHash('sha256').update(key).digest('hex')
