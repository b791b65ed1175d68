/**
 * The dashboard's sign-in. Signing in with an API key makes a server-side session: the cookie
 * holds a random id (32 bytes), the store keeps only its SHA-256, tied to the key and expiring
 * (MULTIGRID_SESSION_HOURS). Signing out deletes the row, so a copied cookie stops working
 * there and then; revoking the key ends its sessions too. Any instance sharing the store serves
 * the next page. The cookie is one the page's scripts cannot read (HttpOnly; the dashboard has no
 * scripts at all) and the browser sends only on requests that start from this site
 * (SameSite=Strict), Secure over https, and a session cookie, gone when the browser closes.
 *
 * Several local services share one "site" (127.0.0.1 on other ports), so every POST also has to
 * come from this very origin, checked on Sec-Fetch-Site or Origin.
 */
import { createHash, randomBytes } from 'node:crypto'
import { publicOrigin } from '../public-origin.ts'

export const SESSION_COOKIE = 'multigrid_session'
const SESSION_PREFIX = 'mgs_'

/** A new session id for the cookie, and the hash the store keeps instead of it. */
export function newSession(): { id: string; hash: string } {
  const id = SESSION_PREFIX + randomBytes(32).toString('base64url')
  return { id, hash: sessionHash(id) }
}

/** The id has full entropy, so a fast hash is safe (as for API keys). */
export const sessionHash = (id: string) => createHash('sha256').update(id).digest('hex')

export function readSessionId(request: Request): string | null {
  const header = request.headers.get('cookie')
  if (!header) return null
  for (const part of header.split(';')) {
    const [name, ...rest] = part.trim().split('=')
    if (name === SESSION_COOKIE) {
      const value = rest.join('=')
      return value.startsWith(SESSION_PREFIX) && value.length <= 128 ? value : null
    }
  }
  return null
}

const secure = (request: Request) => publicOrigin(request).startsWith('https:')

export function sessionCookie(id: string, request: Request): string {
  // Ids are `mgs_` + base64url: nothing in them needs quoting in a cookie value.
  return `${SESSION_COOKIE}=${id}; Path=/; HttpOnly; SameSite=Strict${secure(request) ? '; Secure' : ''}`
}

export function clearedCookie(request: Request): string {
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure(request) ? '; Secure' : ''}`
}

/** True when a form post comes from a page of this origin (or from no browser at all). */
export function fromThisOrigin(request: Request): boolean {
  const site = request.headers.get('sec-fetch-site')
  if (site) return site === 'same-origin' || site === 'none'
  const origin = request.headers.get('origin')
  if (!origin) return true
  try {
    return new URL(origin).host === new URL(publicOrigin(request)).host
  } catch {
    return false
  }
}
