/**
 * Imported first by the long-running processes (gateway, simulator, and the benches that compare
 * against them): the allocator setting for a server that turns over a kilobyte-sized request and
 * response body per line, thousands of times a second.
 *
 * MIMALLOC_PURGE_DELAY=-1: Bun's allocator, mimalloc, keeps the pages it frees instead of handing
 * them back to the kernel 10 ms later (its default). Otherwise pages freed by one burst go back
 * and are faulted in again, zeroed, by the next. Measured with `npm run bench:dispatch` on
 * 2 cores, against the default in every process: the gateway's CPU per line fell from 235–240 to
 * 150–190 µs, the upstream latency it records from about 60 to 55–58 ms, its throughput rose
 * 5–11%. The price: what the process once used stays resident (about 320 MiB after the bench,
 * against 220–260 MiB).
 *
 * (A larger young generation for the JavaScript heap, BUN_JSC_largeHeapSize=64 MiB instead of
 * Bun's 8 MiB, was measured the same way in alternating runs and made no difference.)
 *
 * The setting is read from the environment once, at start, so the process replaces itself
 * (execve: the same pid, arguments and open stdio, before anything else has run) with it added.
 * A value an operator set is left as it is: `MIMALLOC_PURGE_DELAY=10` restores the default.
 *
 * Nothing is exported: importing this module is what applies it (never from a test runner).
 */
const SETTINGS: Record<string, string> = { MIMALLOC_PURGE_DELAY: '-1' }

const missing = Object.entries(SETTINGS).filter(([name]) => process.env[name] === undefined)
if (missing.length > 0 && typeof process.execve === 'function') {
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    ...process.env,
    ...Object.fromEntries(missing),
  })
}
