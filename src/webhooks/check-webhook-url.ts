/**
 * Where a webhook may point (docs/events-and-webhooks.md): `https://` to public addresses; with the operator's
 * opt-in (MULTIGRID_WEBHOOK_ALLOW_PRIVATE=true) also loopback and private addresses, by `http://`
 * or `https://`, and still no other kind (link-local, where cloud metadata answers, and the
 * rest). The host is resolved and every address it has is judged, so a name cannot be used to
 * reach the gateway's own network; the same rule holds again when each attempt connects
 * (`guardedLookup`), so a name that changes its addresses later cannot either.
 */
import { lookup, type LookupAddress } from 'node:dns'
import { isIP } from 'node:net'
import { classifyAddress } from './classify-address.ts'

const OPT_IN =
  'an operator can allow loopback and private addresses with MULTIGRID_WEBHOOK_ALLOW_PRIVATE=true'

/** The URL's host as an address or a name: IPv6 literals lose their brackets. */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1')

/** A name that takes longer than this to resolve is refused rather than waited for. */
const RESOLVE_TIMEOUT_MS = 5_000

function resolveAll(host: string, timeoutMs: number): Promise<string[]> {
  if (isIP(host)) return Promise.resolve([host])
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(Object.assign(new Error('timeout'), { code: `no answer in ${timeoutMs} ms` })),
      timeoutMs,
    )
    lookup(host, { all: true }, (error, addresses) => {
      clearTimeout(timer)
      if (error) reject(error)
      else resolve(addresses.map((entry) => entry.address))
    })
  })
}

/**
 * Why addresses of `host` may not be reached, or null when they all may: public ones, and with
 * the opt-in loopback and private ones, never link-local (cloud metadata), shared, multicast,
 * unspecified or reserved ones.
 */
function addressProblem(
  host: string,
  addresses: readonly string[],
  allowPrivate: boolean,
): string | null {
  for (const address of addresses) {
    const kind = classifyAddress(address)
    const optable = kind === 'loopback' || kind === 'private'
    if (kind === 'public' || (allowPrivate && optable)) continue
    const where = address === host ? address : `${host} resolves to ${address}`
    const article = kind === 'unspecified' ? 'an' : 'a'
    // The opt-in is named only where it would help: it never opens link-local (cloud metadata).
    const rule = allowPrivate
      ? 'webhooks may reach public, loopback and private addresses, no other kind'
      : optable
        ? `webhooks may not reach the gateway's own network (${OPT_IN})`
        : 'webhooks may never reach one, not even with MULTIGRID_WEBHOOK_ALLOW_PRIVATE=true'
    return `${where}, ${article} ${kind} address: ${rule}`
  }
  return null
}

/**
 * Why `text` may not be a webhook URL (a sentence saying what to send instead), or null when it
 * may. Resolves the host.
 */
export async function webhookUrlProblem(
  text: string,
  allowPrivate: boolean,
  resolveTimeoutMs = RESOLVE_TIMEOUT_MS,
): Promise<string | null> {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'url must be an absolute https:// URL, e.g. https://example.com/hooks/multigrid'
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return `url must start with https://, not ${url.protocol}//`
  }
  if (url.protocol === 'http:' && !allowPrivate) {
    return 'url must start with https:// (http:// is allowed only to loopback and private addresses, when the operator sets MULTIGRID_WEBHOOK_ALLOW_PRIVATE=true)'
  }
  const host = hostOf(url)
  let addresses: string[]
  try {
    addresses = await resolveAll(host, resolveTimeoutMs)
  } catch (error) {
    const code = (error as { code?: string }).code ?? 'no address'
    return `the host ${host} of url could not be resolved (${code}); give a host that resolves`
  }
  const problem = addressProblem(host, addresses, allowPrivate)
  if (problem || url.protocol !== 'http:') return problem
  const open = plainHttpProblem(host, addresses)
  return open && `${open}; use https://`
}

/** Why `http://` may not go to addresses of `host` (a public one), or null. */
function plainHttpProblem(host: string, addresses: readonly string[]): string | null {
  const open = addresses.find((address) => classifyAddress(address) === 'public')
  return open
    ? `${host} resolves to the public address ${open}: http:// is allowed only to loopback and private addresses`
    : null
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void

/**
 * A `lookup` for the connections that deliver webhooks: it resolves as usual and fails the
 * connection when any address is one a webhook may not reach (addressProblem) or, for `http://`
 * (`plain`), a public one, so the address connected to is the one judged.
 */
export function guardedLookup(allowPrivate: boolean, plain = false) {
  return (
    hostname: string,
    options: { all?: boolean; family?: number | string },
    callback: LookupCallback,
  ) => {
    const family = options.family === 'IPv6' ? 6 : options.family === 'IPv4' ? 4 : options.family
    lookup(
      hostname,
      { all: true, family: (family as 0 | 4 | 6 | undefined) ?? 0 },
      (error, found) => {
        if (error) return callback(error, [])
        const addresses = found.map((entry) => entry.address)
        const problem =
          (plain ? plainHttpProblem(hostname, addresses) : null) ??
          addressProblem(hostname, addresses, allowPrivate)
        if (problem) return callback(Object.assign(new Error(problem), { code: 'EPRIVATE' }), [])
        if (options.all) return callback(null, found)
        callback(null, found[0]!.address, found[0]!.family)
      },
    )
  }
}
