/**
 * The admission queue of the simulator's GPU-pool mode: it plays one vLLM replica, which runs at
 * most `capacity` requests at once (its `--max-num-seqs`), keeps the rest in a FIFO waiting
 * queue, and refuses with 503 once that queue holds `maxQueued` (the way `--max-num-queued-reqs`
 * bounds vLLM's otherwise unbounded queue). Capacity can change while it runs, like a replica
 * that gains or loses GPUs: a raise starts waiters at once, a cut lets the running ones finish.
 */

/** What admit() decided: run now (after the promise), or refused because the queue is full. */
export type Admission = Promise<boolean> | 'full'

interface Waiter {
  start: (admitted: boolean) => void
}

export class GpuQueue {
  running = 0
  // FIFO with a moving head, so a long queue does not pay Array.shift's copying.
  private waiters: (Waiter | null)[] = []
  private head = 0
  // Entries left behind by clients that gave up while waiting; not counted as waiting.
  private gone = 0

  constructor(
    private capacity: number,
    private maxQueued: number | null,
  ) {}

  get waiting(): number {
    return this.waiters.length - this.head - this.gone
  }

  /**
   * Takes a slot, waiting in line for one when all are busy. The promise says whether the
   * request got its slot (true) or left the queue because its client gave up (false; it then
   * holds nothing). Every `true` must be followed by exactly one release().
   */
  admit(signal?: AbortSignal): Admission {
    if (this.running < this.capacity && this.waiting === 0) {
      this.running++
      return Promise.resolve(true)
    }
    if (this.maxQueued !== null && this.waiting >= this.maxQueued) return 'full'
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = { start: resolve }
      this.waiters.push(waiter)
      signal?.addEventListener(
        'abort',
        () => {
          // A client that gave up leaves the line, as vLLM aborts a cancelled request.
          const index = this.waiters.indexOf(waiter, this.head)
          if (index < 0) return
          this.waiters[index] = null
          this.gone++
          resolve(false)
        },
        { once: true },
      )
    })
  }

  release(): void {
    this.running--
    this.startWaiters()
  }

  /** New limits from the next admission on; a larger capacity starts waiters at once. */
  resize(capacity: number, maxQueued: number | null): void {
    this.capacity = capacity
    this.maxQueued = maxQueued
    this.startWaiters()
  }

  /** Lets every waiter run: the mode was switched off, so nothing bounds them any more. */
  drain(): void {
    this.capacity = Number.POSITIVE_INFINITY
    this.startWaiters()
  }

  private startWaiters(): void {
    while (this.running < this.capacity && this.head < this.waiters.length) {
      const waiter = this.waiters[this.head++]
      if (waiter === null) {
        this.gone--
        continue
      }
      this.running++
      waiter.start(true)
    }
    // Compact once the consumed prefix dominates, keeping pushes and starts O(1) amortised.
    if (this.head > 1024 && this.head * 2 > this.waiters.length) {
      this.waiters = this.waiters.slice(this.head)
      this.head = 0
    }
    // Drop aborted entries at the front so `waiting` counts only requests still in line.
    while (this.head < this.waiters.length && this.waiters[this.head] === null) {
      this.head++
      this.gone--
    }
  }
}

/** One gauge in Prometheus text exposition format, labelled like vLLM's. */
function gauge(name: string, help: string, model: string, value: number): string {
  const label = model.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
  return (
    `# HELP ${name} ${help}\n# TYPE ${name} gauge\n` +
    `${name}{engine="0",model_name="${label}"} ${value}\n`
  )
}

/** vLLM's load gauges for GET /metrics: the ones a router reads to decide where to send. */
export function metricsText(queue: GpuQueue, capacity: number, model: string): string {
  // vLLM's KV-cache usage is a fraction 0..1; here each running request takes an equal share.
  const kv = capacity > 0 ? Math.min(1, queue.running / capacity) : 1
  return (
    gauge(
      'vllm:num_requests_running',
      'Number of requests in model execution batches.',
      model,
      queue.running,
    ) +
    gauge(
      'vllm:num_requests_waiting',
      'Number of requests waiting to be processed.',
      model,
      queue.waiting,
    ) +
    gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', model, kv)
  )
}

/**
 * vLLM's ORCA load report for the `endpoint-load-metrics` answer header, sent when the request
 * asked with `endpoint-load-metrics-format: text` or `json` (vllm/entrypoints/openai/orca_metrics.py):
 * `TEXT named_metrics.kv_cache_usage_perc=0.5, named_metrics.num_requests_waiting=3.0`. Null for
 * another format, which vLLM answers without the header.
 */
export function loadReport(format: string, queue: GpuQueue, capacity: number): string | null {
  const kv = capacity > 0 ? Math.min(1, queue.running / capacity) : 1
  // Python prints its floats with a decimal point: 3.0, not 3.
  const metrics: [string, number][] = [
    ['kv_cache_usage_perc', kv],
    ['num_requests_waiting', queue.waiting],
  ]
  switch (format.trim().toLowerCase()) {
    case 'text':
      return `TEXT ${metrics.map(([name, value]) => `named_metrics.${name}=${pyFloat(value)}`).join(', ')}`
    case 'json':
      return `JSON ${JSON.stringify({ named_metrics: Object.fromEntries(metrics) })}`
    default:
      return null
  }
}

function pyFloat(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value)
}
