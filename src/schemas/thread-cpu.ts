/**
 * CPU time of one thread, so that a schema's budget (schema-checks.ts) counts the work it made,
 * not the time its thread spent waiting for a core: the schema threads run at a lower priority
 * than the event loop, and on a busy machine an ordinary schema would otherwise pass its budget.
 * Linux's schedstat gives it in nanoseconds; elsewhere there is none (null) and the budget is
 * wall time.
 */
import { readFileSync } from 'node:fs'

function readNs(path: string): number | null {
  try {
    const text = readFileSync(path, 'utf8')
    const ns = Number(text.slice(0, text.indexOf(' ')))
    return Number.isFinite(ns) ? ns : null
  } catch {
    return null
  }
}

/** The calling thread's CPU time (ns), or null. */
export const ownCpuNs = () => readNs('/proc/thread-self/schedstat')

/** The calling thread's id in this process, for another thread's `cpuNsOf`; null off Linux. */
export function ownThreadId(): number | null {
  try {
    const link = readFileSync('/proc/thread-self/stat', 'utf8')
    const tid = Number(link.slice(0, link.indexOf(' ')))
    return Number.isInteger(tid) ? tid : null
  } catch {
    return null
  }
}

/** CPU time (ns) of this process's thread `tid`, or null. */
export const cpuNsOf = (tid: number) => readNs(`/proc/self/task/${tid}/schedstat`)
