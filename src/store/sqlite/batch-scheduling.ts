/**
 * Puts the calling thread under Linux's SCHED_BATCH policy: the same share of the CPU as any
 * other thread, but its wake-ups never preempt the thread that is running.
 *
 * For the SQLite threads: the checkpoint thread, and above all the dispatch thread, which wakes
 * for every message the event loop posts (a claim, a batch of outcomes). On a busy machine the
 * scheduler would often hand it the core of the event loop that just woke it, and upstream
 * answers then wait for the event loop to get a core back. Measured
 * with `npm run bench:dispatch` on 2 cores: the event loop's CPU per line fell about 10%, lines/s
 * rose 2–3%.
 *
 * Through libc's sched_setscheduler (bun:ffi); anywhere that is not Linux with glibc, or when it
 * fails, nothing changes and false is returned.
 */
import { dlopen, FFIType, ptr } from 'bun:ffi'

const SCHED_BATCH = 3

export function scheduleAsBatch(): boolean {
  if (process.platform !== 'linux') return false
  try {
    const libc = dlopen('libc.so.6', {
      sched_setscheduler: { args: [FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
    })
    // pid 0 is the calling thread; struct sched_param { int sched_priority } must be 0 for SCHED_BATCH.
    const applied = libc.symbols.sched_setscheduler(0, SCHED_BATCH, ptr(new Int32Array(1))) === 0
    libc.close()
    return applied
  } catch {
    return false
  }
}
