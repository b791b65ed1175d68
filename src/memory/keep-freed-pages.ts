/**
 * Imported first by the long-running processes (gateway, simulator, the benches that compare
 * against them): tells Bun's allocator, mimalloc, to keep the pages it frees instead of handing
 * them back to the kernel 10 ms later (its default `purge_delay`).
 *
 * Why: a gateway turns over a kilobyte-sized request and response body per line, thousands of
 * times a second. With the default, pages freed by one burst go back to the kernel and are
 * faulted in again, zeroed, by the next. Measured with `npm run bench:dispatch` on 2 cores:
 * the gateway's CPU per line fell by about a quarter (215–275 → 140–175 µs), the upstream latency
 * it records by 4–10 ms, and its throughput rose 10–15%. The price is memory: what the process
 * once used stays resident (peak about 300 MiB there, against 260 MiB).
 *
 * mimalloc reads its options from the environment once, at start, so the process replaces itself
 * (execve: the same pid, arguments and open stdio; before anything else has run) with
 * MIMALLOC_PURGE_DELAY=-1 added. An operator's own MIMALLOC_PURGE_DELAY is left as it is, so
 * `MIMALLOC_PURGE_DELAY=10` restores mimalloc's default.
 */
if (process.env.MIMALLOC_PURGE_DELAY === undefined && typeof process.execve === 'function') {
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    ...process.env,
    MIMALLOC_PURGE_DELAY: '-1',
  })
}
