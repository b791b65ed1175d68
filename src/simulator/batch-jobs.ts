/**
 * The providers' batch APIs as the simulator plays them (docs/batch-lanes.md): a provider batch is a list of
 * requests answered at creation (so its usage is honest and fixed), whose lines come due one by
 * one across the turnaround — line i of n at `created + turnaround × (i + 1) / n` — so a cancel
 * or an expiry keeps what was due before it, as the real APIs keep what they finished.
 *
 * Terminology: a *job* is one provider batch; a *line* one request inside it, with the caller's
 * `custom_id` and the answer it will get (`status` 200 with a body, or an error status and body).
 */

/** One request of a provider batch with its prepared answer. */
export interface JobLine {
  customId: string
  /** HTTP status the request would have got live; 200 is a success. */
  status: number
  /** The answer body (success) or the error envelope, as the live endpoint would send it. */
  body: unknown
  /** The request's body as received. */
  request?: unknown
}

/** How a job ends, decided from the clock each time the job is read. */
export type JobEnd = 'completed' | 'expired' | 'cancelled' | 'failed'

/** One provider batch. */
export interface Job {
  id: string
  dialect: 'openai' | 'anthropic'
  lines: JobLine[]
  createdAt: number
  turnaroundMs: number
  /** Ends `expired` at this time when its lines are not all due by then; null: never expires. */
  expireAtMs: number | null
  /** Set when a cancel arrives; the job ends `cancelled` cancelDelayMs after it. */
  cancelAt: number | null
  cancelDelayMs: number
  /** Set when validation refused the batch (OpenAI's `failed` with its `errors`). */
  failure: { code: string; message: string } | null
  metadata: Record<string, string> | null
  endpoint: string
  inputFileId: string | null
}

/** What a job looks like at one instant. */
export interface JobView {
  /** Lines due (finished) by now, in input order. */
  done: number
  end: JobEnd | null
  /** The instant it ended (ms), or null while running. */
  endedAt: number | null
  /** A cancel is asked for and not yet through. */
  cancelling: boolean
}

/** When line `index` of the job is due, as an absolute time in ms. */
export function dueAt(job: Job, index: number): number {
  return job.createdAt + (job.turnaroundMs * (index + 1)) / job.lines.length
}

/** The lines due by `at` (ms): they are due in order, so a count says which. */
function doneBy(job: Job, at: number): number {
  if (job.turnaroundMs <= 0) return job.lines.length
  const fraction = (at - job.createdAt) / job.turnaroundMs
  return Math.max(0, Math.min(job.lines.length, Math.floor(fraction * job.lines.length + 1e-9)))
}

/** The job as it stands at `now`. */
export function viewJob(job: Job, now: number): JobView {
  if (job.failure !== null)
    return { done: 0, end: 'failed', endedAt: job.createdAt, cancelling: false }
  const finishAt = job.createdAt + Math.max(0, job.turnaroundMs)
  const cancelEnd = job.cancelAt === null ? null : job.cancelAt + job.cancelDelayMs
  const candidates: [JobEnd, number][] = [['completed', finishAt]]
  if (job.expireAtMs !== null && job.expireAtMs < finishAt)
    candidates.push(['expired', job.expireAtMs])
  // A cancel only counts while the job is still running when it arrives.
  if (job.cancelAt !== null && job.cancelAt < finishAt && cancelEnd !== null)
    candidates.push(['cancelled', cancelEnd])
  candidates.sort((a, b) => a[1] - b[1])
  const [end, endedAt] = candidates[0]
  // Work stops at the cancel request (not when it is through) and at the expiry.
  const stopAt = end === 'cancelled' ? (job.cancelAt as number) : endedAt
  if (now >= endedAt) return { done: doneBy(job, stopAt), end, endedAt, cancelling: false }
  const cancelling = job.cancelAt !== null && job.cancelAt < finishAt
  const workedUntil = cancelling ? Math.min(now, job.cancelAt as number) : now
  return { done: doneBy(job, workedUntil), end: null, endedAt: null, cancelling }
}

/** A line counts as failed when its answer is not a 200. */
export function lineFailed(line: JobLine): boolean {
  return line.status !== 200
}

/** Seconds since the epoch, as both APIs report times. */
export const unixSeconds = (ms: number): number => Math.floor(ms / 1000)

/** The job registry of one simulator; both dialects keep their jobs here. */
export class JobBook {
  readonly jobs = new Map<string, Job>()
  /** Creates, lists and cancels seen, for tests that count what reached the provider. */
  readonly counts = { created: 0, cancelled: 0 }
  private next = 0

  nextId(prefix: string): string {
    this.next++
    return `${prefix}${Date.now().toString(36)}${this.next.toString().padStart(6, '0')}`
  }

  add(job: Job): Job {
    this.jobs.set(job.id, job)
    this.counts.created++
    return job
  }

  /** Jobs of one dialect, newest first (the order both list endpoints use). */
  list(dialect: Job['dialect']): Job[] {
    return [...this.jobs.values()].filter((job) => job.dialect === dialect).reverse()
  }
}
