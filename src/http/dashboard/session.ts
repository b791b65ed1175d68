/**
 * The dashboard's sign-in: the API key itself, kept in a cookie the page's scripts cannot read
 * (HttpOnly; the dashboard has no scripts at all) and the browser sends only on requests that
 * start from this site (SameSite=Strict). No server-side session: any instance behind a load
 * balancer can serve the next page, and revoking the key signs the browser out too. It is a
 * session cookie, gone when the browser closes.
 *
 * Several local services share one "site" (127.0.0.1 on other ports), so every POST also has to
 * come from this very origin, checked on Sec-Fetch-Site or Origin.
 */
export const KEY_COOKIE = 'multigrid_key'

export function readKey(request: Request): string | null {
  const header = request.headers.get('cookie')
  if (!header) return null
  for (const part of header.split(';')) {
    const [name, ...rest] = part.trim().split('=')
    if (name === KEY_COOKIE) {
      const value = rest.join('=')
      return value.length > 0 ? value : null
    }
  }
  return null
}

const secure = (request: Request) =>
  new URL(request.url).protocol === 'https:' || request.headers.get('x-forwarded-proto') === 'https'

export function keyCookie(key: string, request: Request): string {
  // Keys are `mg_` + base64url: nothing in them needs quoting in a cookie value.
  return `${KEY_COOKIE}=${key}; Path=/; HttpOnly; SameSite=Strict${secure(request) ? '; Secure' : ''}`
}

export function clearedCookie(request: Request): string {
  return `${KEY_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure(request) ? '; Secure' : ''}`
}

/** True when a form post comes from a page of this origin (or from no browser at all). */
export function fromThisOrigin(request: Request): boolean {
  const site = request.headers.get('sec-fetch-site')
  if (site) return site === 'same-origin' || site === 'none'
  const origin = request.headers.get('origin')
  if (!origin) return true
  const host = request.headers.get('x-forwarded-host') ?? request.headers.get('host')
  try {
    return new URL(origin).host === host
  } catch {
    return false
  }
}
