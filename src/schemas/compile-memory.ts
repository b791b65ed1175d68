/**
 * What schema-checks.ts remembers of compiles, so that the same schema sent again costs no
 * schema thread a second time:
 * - a compile of a text already running for the same owner is that one, not another job in its
 *   queue (a client's burst of calls with one schema);
 * - a text refused (not a schema, a pattern RE2 cannot take, or too slow to compile) is refused
 *   again at once for REFUSAL_MS, whoever sends it.
 * A compile bomb held a thread for its whole budget, about a second, on every call that carried
 * it: two accounts repeating theirs kept both threads busy, and a third account's structured
 * calls waited 1–4 s for one (SPEC §19: nothing else on the instance waits). Now each distinct
 * bomb costs one budget a minute. Texts that compiled are not kept here: their threads keep them
 * (answer-schema.ts), and a compile of a known one is quick.
 */
/** How long a refusal is remembered: a text too slow on a loaded machine is tried again after. */
export const REFUSAL_MS = 60_000
/** Refusals remembered at most (texts of up to 64 KiB each: a few MiB at worst). */
const REFUSALS_KEPT = 64

/** What a compile answers (schema-checks.ts CompileVerdict): whether it compiled, in how long. */
interface Verdict {
  ok: boolean
  ms: number
}

export interface CompileMemory<V extends Verdict> {
  /** `compile` the text for `owner`, unless a running compile or a refusal already answers it. */
  once(owner: string, text: string, compile: () => Promise<V>): Promise<V>
}

/**
 * `kept`: whether a refusal is the text's own, to remember (not a thread that died or a pool
 * that closed under it); `now`: the clock.
 */
export function createCompileMemory<V extends Verdict>({
  kept,
  now = Date.now,
}: {
  kept: (refusal: V) => boolean
  now?: () => number
}): CompileMemory<V> {
  /** Text → its refusal and when it was made, oldest first. */
  const refusals = new Map<string, { verdict: V; at: number }>()
  /** Owner and text → the compile running for them. */
  const running = new Map<string, Promise<V>>()

  const refusalOf = (text: string): V | null => {
    const refused = refusals.get(text)
    if (!refused) return null
    if (now() - refused.at < REFUSAL_MS) return { ...refused.verdict, ms: 0 }
    refusals.delete(text)
    return null
  }
  const remember = (text: string, verdict: V) => {
    refusals.delete(text)
    refusals.set(text, { verdict, at: now() })
    if (refusals.size > REFUSALS_KEPT) refusals.delete(refusals.keys().next().value!)
  }

  return {
    once(owner, text, compile) {
      const refused = refusalOf(text)
      if (refused) return Promise.resolve(refused)
      const key = `${owner}\u0000${text}`
      const already = running.get(key)
      if (already) return already
      const compiling = compile()
        .then((verdict) => {
          if (!verdict.ok && kept(verdict)) remember(text, verdict)
          return verdict
        })
        .finally(() => running.delete(key))
      running.set(key, compiling)
      return compiling
    },
  }
}
