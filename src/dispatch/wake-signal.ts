/**
 * How the dispatcher's claim loop sleeps between turns: until the poll interval is up, or sooner
 * when poked (a nudge, room freed by finished lines). A poke while the loop is awake is kept, so a
 * turn that missed it looks again before sleeping.
 */
export interface WakeSignal {
  /** Wakes the sleeping loop, or marks a poke for the loop that is awake. */
  poke(): void
  /** Whether a poke came since the last call (and forgets it). */
  takePoke(): boolean
  /** Resolves after `ms`, or at the next poke. */
  sleep(ms: number): Promise<void>
}

export function createWakeSignal(): WakeSignal {
  let wake: (() => void) | null = null
  let poked = false
  return {
    poke() {
      if (wake) wake()
      else poked = true
    },
    takePoke() {
      const was = poked
      poked = false
      return was
    },
    sleep(ms) {
      return new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms)
        function done() {
          clearTimeout(timer)
          wake = null
          resolve()
        }
        wake = done
      })
    },
  }
}
