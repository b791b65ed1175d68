/**
 * Which IP addresses a webhook may reach: public unicast only, unless the operator allows private
 * ones (MULTIGRID_WEBHOOK_ALLOW_PRIVATE). Everything else is named, so a refusal can say why:
 * loopback, private (RFC 1918, IPv6 unique local), link-local (where cloud metadata services
 * answer, 169.254.169.254), shared (carrier-grade NAT), and the special-purpose blocks of the IANA
 * registries. IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by it.
 */
import { isIPv4, isIPv6 } from 'node:net'

export type AddressKind =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'shared'
  | 'unspecified'
  | 'multicast'
  | 'reserved'

const V4: [string, number, AddressKind][] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'],
  ['198.51.100.0', 24, 'reserved'],
  ['203.0.113.0', 24, 'reserved'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
]

const v4Number = (address: string) =>
  address.split('.').reduce((value, part) => value * 256 + Number(part), 0)

function classifyV4(value: number): AddressKind {
  for (const [base, bits, kind] of V4) {
    const size = 2 ** (32 - bits)
    const start = v4Number(base)
    if (value >= start && value < start + size) return kind
  }
  return 'public'
}

/** The 8 groups of an IPv6 address (a zone id, `%eth0`, is dropped). */
function v6Groups(address: string): number[] {
  let text = address.split('%')[0]!.toLowerCase()
  // A dotted IPv4 tail (::ffff:10.0.0.1) is two groups.
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (tail) {
    const value = v4Number(tail[1]!)
    text = `${text.slice(0, -tail[1]!.length)}${(value >>> 16).toString(16)}:${(value & 0xffff).toString(16)}`
  }
  const [head, rest] = text.split('::') as [string, string | undefined]
  const left = head ? head.split(':') : []
  const right = rest === undefined ? [] : rest ? rest.split(':') : []
  const fill = rest === undefined ? [] : Array(8 - left.length - right.length).fill('0')
  return [...left, ...fill, ...right].map((group) => parseInt(group, 16))
}

function classifyV6(address: string): AddressKind {
  const g = v6Groups(address)
  const v4At = (high: number) => classifyV4(g[high]! * 65536 + g[high + 1]!)
  const zeros = (from: number, to: number) => g.slice(from, to).every((group) => group === 0)
  if (zeros(0, 8)) return 'unspecified'
  if (zeros(0, 7) && g[7] === 1) return 'loopback'
  if (zeros(0, 5) && g[5] === 0xffff) return v4At(6) // IPv4-mapped
  if (zeros(0, 6)) return 'reserved' // IPv4-compatible, deprecated
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4At(6) // NAT64
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'private' // local-use NAT64
  if (g[0] === 0x2002) return v4At(1) // 6to4
  if ((g[0]! & 0xfe00) === 0xfc00) return 'private' // unique local
  if ((g[0]! & 0xffc0) === 0xfe80) return 'link-local'
  if ((g[0]! & 0xffc0) === 0xfec0) return 'private' // site-local, deprecated
  if ((g[0]! & 0xff00) === 0xff00) return 'multicast'
  if (g[0] === 0x2001 && g[1] === 0x0db8) return 'reserved' // documentation
  if (g[0] === 0x0100 && zeros(1, 4)) return 'reserved' // discard
  return 'public'
}

/** What kind of address `address` (an IPv4 or IPv6 literal) is; not an IP at all is reserved. */
export function classifyAddress(address: string): AddressKind {
  if (isIPv4(address)) return classifyV4(v4Number(address))
  if (isIPv6(address.split('%')[0]!)) return classifyV6(address)
  return 'reserved'
}
