/**
 * The origin a client reached the gateway at, for an absolute URL in an answer (a message batch's
 * results_url, which the Anthropic SDK fetches as it is). Behind a proxy that ends TLS the request
 * arrives as http on an inner address: the proxy's X-Forwarded-Proto and X-Forwarded-Host say
 * what the client used. Only the caller's own answer carries it, so a forged header misleads no
 * one else.
 */
export function publicOrigin(request: Request): string {
  const url = new URL(request.url)
  const proto = firstValue(request.headers.get('x-forwarded-proto'))?.toLowerCase()
  const host = firstValue(request.headers.get('x-forwarded-host'))
  const scheme = proto === 'https' || proto === 'http' ? proto : url.protocol.slice(0, -1)
  return `${scheme}://${host && VALID_HOST.test(host) ? host : url.host}`
}

/** A host and optional port, nothing that could end the authority early (no /, @, ?, #). */
const VALID_HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/

/** A proxy chain lists one value per hop, the client's first. */
const firstValue = (header: string | null) => header?.split(',')[0]?.trim() || undefined
