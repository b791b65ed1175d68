/**
 * Names the calling thread for the operating system (`top -H`, `ps -L`, /proc/<pid>/task/*\/comm),
 * so an operator, a profile or a test tells the gateway's background threads apart: a Worker is
 * otherwise called "Worker", and so is, for a moment or for good, any thread the runtime starts
 * from one (a new Linux thread takes its creator's name). On Linux only; elsewhere, or when the
 * kernel refuses, the name stays as it was and the result is false.
 */
import { writeFileSync } from 'node:fs'

/** Linux keeps 15 bytes of a thread's name. */
const NAME_MAX = 15

export function nameThread(name: string): boolean {
  if (process.platform !== 'linux') return false
  try {
    // /proc/thread-self is the calling thread's own entry (Linux 3.17+).
    writeFileSync('/proc/thread-self/comm', name.slice(0, NAME_MAX))
    return true
  } catch {
    return false
  }
}
