/**
 * A Worker for background work (the stores' dispatch threads, SQLite's checkpoint and admission
 * threads, the halves of a big file's validation): it does not keep the process alive by itself,
 * and `onLost` hears once if it dies (an uncaught error, or it closed).
 */
export function startBackgroundThread(script: URL, onLost: (reason: string) => void): Bun.Worker {
  // DOM's Worker type (tsconfig lib) lacks Bun's ref/unref.
  const worker = new Worker(script.href) as unknown as Bun.Worker
  worker.unref()
  let lost = false
  const lose = (reason: string) => {
    if (lost) return
    lost = true
    onLost(reason)
  }
  worker.addEventListener('error', (event) => lose((event as ErrorEvent).message))
  worker.addEventListener('close', () => lose('closed'))
  return worker
}
