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
   * A slot for one more stream of `keyId`, or a 429 limit_exceeded. `stillValid` answers whether
   * the key (or the session it signed) is still good; false ends every stream of the key.
   */
  open(keyId: string, stillValid: () => Promise<boolean>): StreamSlot
  /** Streams open now for `keyId`. */
  openFor(keyId: string): number
  /** Ends every stream (a stop). */
  close(): void
}

interface KeyStreams {
  streams: Set<AbortController>
  stillValid: () => Promise<boolean>
  checking: boolean
}

export function createStreamSlots(options: {
  maxPerKey: number
  /** How often each key with streams is checked (250 ms: revocation noticed well inside 2 s). */
  checkEveryMs?: number
}): StreamSlots {
  const { maxPerKey } = options
  const checkEveryMs = options.checkEveryMs ?? 250
  const byKey = new Map<string, KeyStreams>()
  let timer: ReturnType<typeof setInterval> | null = null

  function endAll(keyId: string) {
    const entry = byKey.get(keyId)
    if (!entry) return
    byKey.delete(keyId)
    for (const controller of entry.streams) controller.abort(new Error('the key was revoked'))
  }

  function check() {
    for (const [keyId, entry] of byKey) {
      if (entry.checking) continue
      entry.checking = true
      entry
        .stillValid()
        .then((valid) => {
          if (!valid) endAll(keyId)
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
    open(keyId, stillValid) {
      let entry = byKey.get(keyId)
      const used = entry?.streams.size ?? 0
      if (used >= maxPerKey) {
        throw refuse(
          'limit_exceeded',
          `this key has ${used} progress streams open, its limit; close one (or poll GET /v1/batches/{id}) before opening another`,
          { detail: { limit: { open_streams: maxPerKey, used } } },
        )
      }
      if (!entry) {
        entry = { streams: new Set(), stillValid, checking: false }
        byKey.set(keyId, entry)
      }
      const controller = new AbortController()
      entry.streams.add(controller)
      timer ??= setInterval(check, checkEveryMs)
      let released = false
      return {
        signal: controller.signal,
        release() {
          if (released) return
          released = true
          const current = byKey.get(keyId)
          current?.streams.delete(controller)
          if (current && current.streams.size === 0) byKey.delete(keyId)
          stopTimerIfIdle()
        },
      }
    },
    openFor: (keyId) => byKey.get(keyId)?.streams.size ?? 0,
    close() {
      for (const keyId of [...byKey.keys()]) endAll(keyId)
      stopTimerIfIdle()
    },
  }
}
