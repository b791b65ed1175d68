/**
 * The slot hand-over: a call whose 2xx answer has arrived whole gives its provider slot back
 * right there, from inside the connection's own handling of the answer (the HTTP client's
 * onAnswered hook), so that the next waiting line is sent at once and takes that keep-alive
 * connection (providers/connection-pool.ts) instead of one a turn of the event loop later:
 * +3–10% lines a second in bench:dispatch (issue 15). Only a whole 2xx answer hands on; any
 * other is read first, so a 429 pauses the provider before its slot goes to anyone.
 *
 * The hook does not say whose answer it was, and need not: every call sent through send() makes
 * exactly one request that can be answered 2xx, so an answer means one sent call is done with the
 * upstream. Its slot goes on now, and the next sent call to end gives back nothing (whichever it
 * is, it is done with the upstream too), which keeps the in-flight bound.
 */
import type { ProviderGate } from './provider-gate.ts'

export interface SlotHandOver {
  /** For the HTTP client (HttpClientOptions.onAnswered): a sent call's whole 2xx answer arrived. */
  answered(): void
  /** A call holding a slot is being sent. */
  sent(): void
  /** A sent call ends: its slot is given back, unless an answer has handed one on already. */
  ended(): void
}

export function createSlotHandOver(gate: ProviderGate): SlotHandOver {
  /** Sent calls that have not ended. */
  let open = 0
  /** Of those, how many slots answers have handed on already. */
  let handed = 0
  return {
    answered() {
      if (handed >= open) return // not a sent call's answer: nothing of ours to hand on
      handed++
      gate.release()
    },
    sent() {
      open++
    },
    ended() {
      open--
      if (handed > 0) handed--
      else gate.release()
    },
  }
}
