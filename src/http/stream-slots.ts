/**
 * The progress streams open on this instance, per key (docs/webhooks-and-streams.md): at most `maxPerKey` at once
 * (one more is 429 limit_exceeded), and every stream of a key ends within 2 s of its revocation.
 *
 * Counted for the whole fleet when the gateway has Redis (`fleet`, src/coordination/
 * fleet-streams.ts: an expiring record per stream, renewed while it lives); without Redis, or
 * while Redis is away, per instance, so that N instances let a key hold up to N × maxPerKey.
 * This instance's own count applies either way.
 *
 * Revocation is asked of the store (through the key cache, whose entries live at most 1 s), not
 * heard: a key revoked on another instance, or by the CLI, is noticed here too. One check per key
 * with open streams every `checkEveryMs`, however many streams it has.
 */
import { randomUUID } from 'node:crypto'
import type { FleetStreams } from '../coordination/fleet-streams.ts'
import { refuse } from '../errors.ts'

export interface StreamSlot {
  /** Aborted when the key was revoked: the stream ends. */
  signal: AbortSignal
  /** Gives the slot back; the stream calls it once it has ended, however it ended. */
  release(): void
}

export interface StreamSlots {
  /**
   * A slot for one more stream of `keyId`, or a 429 limit_exceeded. `check.stillValid` answers
   * whether what signed the request (the key, or a dashboard session) is still good; false ends
   * every stream opened with the same `check.id`, and only those.
   */
  open(keyId: string, check: StreamCheck): Promise<StreamSlot>
  /** Streams open now for `keyId`. */
  openFor(keyId: string): number
  /** Ends every stream (a stop). */
  close(): void
}

/** What a stream's right to go on depends on: `key:<id>` or `session:<hash>`, and how to ask. */
export interface StreamCheck {
  id: string
  stillValid: () => Promise<boolean>
  /** The stream's last line when `stillValid` says no; "the key was revoked" unless told. */
  endedBecause?: string
}

interface Checked {
  streams: Set<AbortController>
  stillValid: () => Promise<boolean>
  endedBecause?: string
  checking: boolean
}

export function createStreamSlots(options: {
  maxPerKey: number
  /** How often each key or session with streams is checked (250 ms: well inside 2 s). */
  checkEveryMs?: number
  /** The fleet-wide count (Redis); without it, per instance. */
  fleet?: FleetStreams
}): StreamSlots {
  const { fleet } = options
  const { maxPerKey } = options
  const checkEveryMs = options.checkEveryMs ?? 250
  /** Open streams per key, for the limit. */
  const byKey = new Map<string, Set<AbortController>>()
  /** The same streams by what they depend on, for the checks. */
  const byCheck = new Map<string, Checked>()
  let timer: ReturnType<typeof setInterval> | null = null

  /** Ends the streams of one check, saying why (their last line: batch-events.ts). */
  function endAll(checkId: string, why = 'the key was revoked') {
    const entry = byCheck.get(checkId)
    if (!entry) return
    byCheck.delete(checkId)
    for (const controller of entry.streams) controller.abort(new Error(why))
  }

  function check() {
    for (const [checkId, entry] of byCheck) {
      if (entry.checking) continue
      entry.checking = true
      entry
        .stillValid()
        .then((valid) => {
          if (!valid) endAll(checkId, entry.endedBecause)
        })
        // A store that does not answer now says nothing about the key: asked again next time.
        .catch(() => {})
        .finally(() => (entry.checking = false))
    }
  }

  function stopTimerIfIdle() {
    if (byKey.size === 0 && timer) {
      clearInterval(timer)
      timer = null
    }
  }

  /** Stopping: no stream opens any more, so none holds the stop's drain open. */
  let closed = false

  return {
    async open(keyId, { id: checkId, stillValid, endedBecause }) {
      if (closed) throw stopping()
      const here = () => byKey.get(keyId)?.size ?? 0
      if (here() >= maxPerKey) throw limitReached(maxPerKey, here())
      const streamId = randomUUID()
      const fleetUsed = fleet ? await fleet.take(keyId, streamId, maxPerKey) : null
      if (fleetUsed !== null) throw limitReached(maxPerKey, fleetUsed)
      // Counted again after the wait: another stream of this key may have opened meanwhile.
      const streams = byKey.get(keyId) ?? new Set<AbortController>()
      if (streams.size >= maxPerKey) {
        fleet?.drop(keyId, streamId)
        throw limitReached(maxPerKey, streams.size)
      }
      if (closed) {
        fleet?.drop(keyId, streamId)
        throw stopping()
      }
      const controller = new AbortController()
      streams.add(controller)
      byKey.set(keyId, streams)
      let checked = byCheck.get(checkId)
      if (!checked) {
        checked = { streams: new Set(), stillValid, endedBecause, checking: false }
        byCheck.set(checkId, checked)
      }
      checked.streams.add(controller)
      timer ??= setInterval(check, checkEveryMs)
      let released = false
      return {
        signal: controller.signal,
        release() {
          if (released) return
          released = true
          fleet?.drop(keyId, streamId)
          streams.delete(controller)
          if (streams.size === 0 && byKey.get(keyId) === streams) byKey.delete(keyId)
          const current = byCheck.get(checkId)
          current?.streams.delete(controller)
          if (current && current.streams.size === 0) byCheck.delete(checkId)
          stopTimerIfIdle()
        },
      }
    },
    openFor: (keyId) => byKey.get(keyId)?.size ?? 0,
    close() {
      closed = true
      // Not a revocation: the client may reconnect at once, to another instance or this one restarted.
      for (const checkId of [...byCheck.keys()])
        endAll(
          checkId,
          'this instance is stopping; open the stream again with Last-Event-ID to resume',
        )
      stopTimerIfIdle()
      fleet?.close()
    },
  }
}

const stopping = () =>
  refuse(
    'not_ready',
    'this instance is stopping; open the stream again: another instance (or this one, restarted) serves it',
    { headers: { 'retry-after': '1' } },
  )

function limitReached(max: number, used: number) {
  return refuse(
    'limit_exceeded',
    `this key has ${used} progress streams open, its limit; close one (or poll GET /v1/batches/{id}) before opening another`,
    { detail: { limit: { open_streams: max, used } } },
  )
}
