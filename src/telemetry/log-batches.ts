/**
 * Log lines to a file descriptor in batches: appended to a buffer, written in one `writeSync`
 * when the buffer passes `maxBytes`, `flushMs` after its first line, at once for an urgent line
 * (an error), and on exit — also the exit of an uncaught error, and process.exit(), which drop
 * whatever an asynchronous write still held. Synchronous writes keep the lines in order and lose
 * none of them there; a consumer slower than the log waits the process, as any synchronous
 * logger does. A descriptor that cannot take a synchronous write (EAGAIN: non-blocking) is
 * written through process.stdout from then on, in order.
 */
import { writeSync } from 'node:fs'

export interface LineBatches {
  /** Appends one line (newline included); `urgent` writes it and everything before it now. */
  write(line: string, urgent?: boolean): void
  /** Writes what is buffered now. */
  flush(): void
}

export interface LineBatchOptions {
  fd: number
  flushMs: number
  maxBytes: number
  /** Where lines go once the descriptor refused a synchronous write. */
  fallback?: (text: string | Uint8Array) => void
}

export function createLineBatches(options: LineBatchOptions): LineBatches {
  let buffer = ''
  let timer: ReturnType<typeof setTimeout> | null = null
  let asynchronous = false

  function flush() {
    if (timer) {
      clearTimeout(timer)
      timer = null
    }
    if (buffer === '') return
    const text = buffer
    buffer = ''
    if (asynchronous) return options.fallback?.(text)
    const bytes = Buffer.from(text, 'utf8')
    let written = 0
    try {
      while (written < bytes.length) written += writeSync(options.fd, bytes, written)
    } catch (error) {
      // Logging never fails its caller: a closed descriptor (EPIPE) loses the lines.
      if ((error as { code?: unknown }).code !== 'EAGAIN' || !options.fallback) return
      asynchronous = true
      options.fallback(bytes.subarray(written))
    }
  }

  return {
    write(line, urgent = false) {
      buffer += line
      if (urgent || buffer.length >= options.maxBytes) return flush()
      if (timer === null) {
        timer = setTimeout(flush, options.flushMs)
        timer.unref?.()
      }
    },
    flush,
  }
}

/** How long a line may wait in the buffer, and how much may wait, before stdout gets it. */
export const LOG_FLUSH_MS = 20
export const LOG_MAX_BYTES = 64 * 1024

let stdout: LineBatches | null = null

/** The process's stdout, in batches: one buffer for every logger, written on exit too. */
export function stdoutLines(): LineBatches {
  if (stdout) return stdout
  const batches = createLineBatches({
    fd: 1,
    flushMs: LOG_FLUSH_MS,
    maxBytes: LOG_MAX_BYTES,
    fallback: (text) => void process.stdout.write(text),
  })
  // 'exit' runs after an uncaught error too (before Bun prints it) and on process.exit().
  process.on('exit', () => batches.flush())
  stdout = batches
  return batches
}
