/** A seeded pseudo-random source in [0, 1), so a simulated fault pattern can be replayed. */
export type Random = () => number

/**
 * mulberry32: 32 bits of state, one multiply-xorshift round per draw. Statistically plenty for
 * choosing faults and jitter, and a draw costs a few nanoseconds at 6,000+ requests/s.
 */
export function createRandom(seed: number): Random {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
