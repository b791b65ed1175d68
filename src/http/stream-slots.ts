/**
 * The progress streams open on this instance, per key (SPEC §19): at most `maxPerKey` at once
 * (one more is 429 limit_exceeded), and every stream of a key ends within 2 s of its revocation.
 *
 * Counted per instance: a stream is one connection to one instance, and counting it fleet-wide
 * would take a shared, expiring record per stream, renewed while it lives, for a bound that is
 * about this instance's file descriptors anyway. A fleet of N instances so lets a key hold up to
 * N × maxPerKey streams in all.
 *
 * Revocation is asked of the store (through the key cache, whose entries live at most 1 s), not
 * heard: a key revoked on another instance, or by the CLI, is noticed here too. One check per key
 * with open streams every `checkEveryMs`, however many streams it has.
 */
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
  open(keyId: string, check: StreamCheck): StreamSlot
  /** Streams open now for `keyId`. */
  openFor(keyId: string): number
  /** Ends every stream (a stop). */
  close(): void
}

/** What a stream's right to go on depends on: `key:<id>` or `session:<hash>`, and how to ask. */
export interface StreamCheck {
  id: string
  stillValid: () => Promise<boolean>
}

interface Checked {
  streams: Set<AbortController>
  stillValid: () => Promise<boolean>
  checking: boolean
}

export function createStreamSlots(options: {
  maxPerKey: number
  /** How often each key or session with streams is checked (250 ms: well inside 2 s). */
  checkEveryMs?: number
}): StreamSlots {
  const { maxPerKey } = options
  const checkEveryMs = options.checkEveryMs ?? 250
  /** Open streams per key, for the limit. */
  const byKey = new Map<string, Set<AbortController>>()
  /** The same streams by what they depend on, for the checks. */
  const byCheck = new Map<string, Checked>()
  let timer: ReturnType<typeof setInterval> | null = null

  function endAll(checkId: string) {
    const entry = byCheck.get(checkId)
    if (!entry) return
    byCheck.delete(checkId)
    for (const controller of entry.streams) controller.abort(new Error('the key was revoked'))
  }

  function check() {
    for (const [checkId, entry] of byCheck) {
      if (entry.checking) continue
      entry.checking = true
      entry
        .stillValid()
        .then((valid) => {
          if (!valid) endAll(checkId)
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

  return {
    open(keyId, { id: checkId, stillValid }) {
      const streams = byKey.get(keyId) ?? new Set<AbortController>()
      const used = streams.size
      if (used >= maxPerKey) {
        throw refuse(
          'limit_exceeded',
          `this key has ${used} progress streams open, its limit; close one (or poll GET /v1/batches/{id}) before opening another`,
          { detail: { limit: { open_streams: maxPerKey, used } } },
        )
      }
      const controller = new AbortController()
      streams.add(controller)
      byKey.set(keyId, streams)
      let checked = byCheck.get(checkId)
      if (!checked) {
        checked = { streams: new Set(), stillValid, checking: false }
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
      for (const checkId of [...byCheck.keys()]) endAll(checkId)
      stopTimerIfIdle()
    },
  }
}
