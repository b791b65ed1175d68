/**
 * Lowers the calling thread's claim on the CPU, for the store's background threads (SQLite's
 * checkpoint thread, and above all either store's dispatch thread, which wakes for every message
 * the event loop posts: a claim, a batch of outcomes). Their work can wait a few milliseconds;
 * upstream answers waiting for the event loop to get a core cannot. Two Linux settings, each
 * measured with `npm run bench:dispatch` (SQLite) on 2 cores, where the gateway, its SQLite
 * thread and the simulator compete for the cores:
 * - SCHED_BATCH: its wake-ups never preempt the running thread, so the scheduler no longer hands
 *   it the core of the event loop that just woke it. The event loop's CPU per line fell about
 *   10%, lines/s rose 2–3%.
 * - nice +10 over the process's own: about a tenth of the event loop's weight when the two share
 *   a core. In alternating runs: recorded upstream latency 65 → 61 ms, lines/s +4–6%. It still
 *   gets a whole core whenever one is idle, as on any machine that is not saturated.
 *
 * Through libc (bun:ffi). Anywhere that is not Linux with glibc, or when a call fails, that
 * setting is left as it was; the result says which took effect.
 */
import { dlopen, FFIType, ptr } from 'bun:ffi'

const SCHED_BATCH = 3
const PRIO_PROCESS = 0
/** How much nicer than the process a background thread is; nice stops at 19. */
export const BACKGROUND_NICE_STEP = 10

export function lowerThreadPriority(): { batch: boolean; nice: boolean } {
  if (process.platform !== 'linux') return { batch: false, nice: false }
  try {
    const libc = dlopen('libc.so.6', {
      sched_setscheduler: { args: [FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
      getpriority: { args: [FFIType.i32, FFIType.u32], returns: FFIType.i32 },
      setpriority: { args: [FFIType.i32, FFIType.u32, FFIType.i32], returns: FFIType.i32 },
    })
    // pid 0 is the calling thread; struct sched_param { int sched_priority } must be 0 for SCHED_BATCH.
    const batch = libc.symbols.sched_setscheduler(0, SCHED_BATCH, ptr(new Int32Array(1))) === 0
    // On Linux, nice belongs to each thread: who = 0 is the calling thread alone. A new thread
    // starts at its creator's, so this is relative to the process's own.
    const current = libc.symbols.getpriority(PRIO_PROCESS, 0)
    const nice =
      libc.symbols.setpriority(PRIO_PROCESS, 0, Math.min(19, current + BACKGROUND_NICE_STEP)) === 0
    libc.close()
    return { batch, nice }
  } catch {
    return { batch: false, nice: false }
  }
}
