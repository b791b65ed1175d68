/** How the user CLI shows a batch: a progress line while it runs, a summary when asked. */
import { MORE_ERRORS, type BatchWaiting, type RequestCounts } from '../domain.ts'

export interface BatchView {
  id: string
  name: string | null
  status: string
  created_at: number
  deadline_at: number
  finished_at: number | null
  request_counts: RequestCounts
  cost_usd: string
  cost_ceiling_usd: string
  /** docs/events-and-webhooks.md: absent from a gateway without retries. */
  parent_batch_id?: string | null
  retried_by?: string[]
  /** Absent from gateways older than docs/money-and-limits.md–13's fields. */
  max_cost_usd?: string | null
  routing?: {
    providers?: Record<
      string,
      {
        succeeded: number
        failed: number
        running: number
        cost_usd: string
        provider_batches?: number
        fallback_at?: number
      }
    >
    eta: number | null
  }
  waiting?: BatchWaiting | null
  /** Why a batch could not run (a facade file's problems, no credit or capacity in time). */
  errors?: { code: string; message: string; line: number | null }[] | null
}

/** Errors `status` prints at most; the batch object has them all. */
const ERRORS_SHOWN = 10

export const FINAL_STATUSES = ['completed', 'failed', 'cancelled', 'expired']

const notRun = (c: BatchView['request_counts']) => c.failed + c.cancelled + c.expired

export function timeLeft(batch: BatchView, now = Date.now() / 1000): string {
  if (batch.finished_at !== null) return 'finished'
  const seconds = Math.floor(batch.deadline_at - now)
  if (seconds <= 0) return 'window ended'
  return `${duration(seconds, false)} left`
}

/** "2 h 5 min", "3 min 20 s", "45 s" (the seconds only under an hour, and only when asked). */
export function duration(seconds: number, withSeconds = true): string {
  const s = Math.max(0, Math.floor(seconds))
  const h = Math.floor(s / 3600)
  const m = Math.floor((s % 3600) / 60)
  if (h > 0) return `${h} h ${m} min`
  if (m > 0) return withSeconds && s % 60 > 0 ? `${m} min ${s % 60} s` : `${m} min`
  return `${s} s`
}

/** The projected finish as a time and, apart, how long until then: "14:05 UTC (in 3 min 20 s)". */
export function etaText(eta: number, now = Date.now() / 1000): string {
  return `${clock(eta, now)} (${untilText(eta, now)})`
}

const untilText = (eta: number, now: number) =>
  eta - now >= 1 ? `in ${duration(eta - now)}` : 'due now'

/** Narrowest progress bar before the line gives up other detail to fit the terminal. */
const MIN_BAR = 10

/** What the line gives up, in order, until it fits: each step a narrower rendering. */
const SHRINK_STEPS: LineShape[] = [
  { bar: 24, message: 'whole', window: true, status: true },
  { bar: MIN_BAR, message: 'whole', window: true, status: true },
  { bar: MIN_BAR, message: 'cut', window: true, status: true },
  { bar: MIN_BAR, message: 'none', window: true, status: true },
  { bar: MIN_BAR, message: 'none', window: true, status: false },
  { bar: MIN_BAR, message: 'none', window: false, status: false },
  { bar: 0, message: 'none', window: false, status: false },
]

interface LineShape {
  bar: number
  message: 'whole' | 'cut' | 'none'
  window: boolean
  status: boolean
}

/**
 * `[██████░░░░]  60%  6/10 done · 5 ok · 1 failed · $0.000120 · in_progress · ETA 14:05 UTC (in
 * 3 min 20 s) · waiting: provider_rate_limited (openai answered 429; …) · window 3 h 2 min left` —
 * the ETA once the gateway can tell, the reason only while the batch waits, the window's time left
 * last. With `columns`, the line fits in that many columns minus one (a line filling the last
 * column wraps on some terminals): the bar narrows, the reason's message shortens then goes, then
 * the status, the window's time left and the bar.
 */
export function progressLine(
  batch: BatchView,
  options: { columns?: number; now?: number } = {},
): string {
  const now = options.now ?? Date.now() / 1000
  const max = options.columns ? Math.max(20, options.columns - 1) : Infinity
  let line = ''
  for (const shape of SHRINK_STEPS) {
    line = renderLine(batch, now, shape, max)
    if (line.length <= max) return line
  }
  return line.slice(0, max - 1) + '…'
}

function renderLine(batch: BatchView, now: number, shape: LineShape, max: number): string {
  const c = batch.request_counts
  const done = c.succeeded + notRun(c)
  const width = shape.bar
  const filled = c.total === 0 ? width : Math.round((done / c.total) * width)
  const percent = c.total === 0 ? 100 : Math.floor((done / c.total) * 100)
  const bar = width > 0 ? `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ` : ''
  const parts = [
    `${bar}${String(percent).padStart(3)}%  ${done}/${c.total} done`,
    `${c.succeeded} ok`,
    `${notRun(c)} failed`,
    `$${batch.cost_usd}`,
  ]
  if (shape.status) parts.push(batch.status)
  const eta = batch.routing?.eta ?? null
  if (eta !== null && batch.finished_at === null) parts.push(`ETA ${etaText(eta, now)}`)
  const left = timeLeft(batch, now)
  const tail = shape.window ? [left.endsWith(' left') ? `window ${left}` : left] : []
  if (batch.waiting) {
    const code = `waiting: ${batch.waiting.code}`
    let message = shape.message === 'none' ? '' : batch.waiting.message
    if (shape.message === 'cut') {
      // What is left of the width once everything else is drawn, less " (" and "…)".
      const rest = [...parts, code, ...tail].join(' · ').length + 4
      message = max - rest > 8 ? message.slice(0, max - rest) + '…' : ''
    }
    parts.push(message ? `${code} (${message})` : code)
  }
  return [...parts, ...tail].join(' · ')
}

const utc = (seconds: number | null) =>
  seconds === null
    ? '—'
    : new Date(seconds * 1000).toISOString().slice(0, 19).replace('T', ' ') + ' UTC'

/** "14:05 UTC", with the date in front when it is not today's. */
function clock(seconds: number, now = Date.now() / 1000): string {
  const full = utc(seconds)
  return full.slice(0, 10) === utc(now).slice(0, 10) ? full.slice(11, 16) + ' UTC' : full
}

export function summary(batch: BatchView): string {
  const c = batch.request_counts
  return [
    `${batch.id}  ${batch.name ?? '(unnamed)'}  ${batch.status}`,
    `  lines     ${c.total}: ${c.succeeded} succeeded, ${notRun(c)} did not (${c.failed} failed, ${c.cancelled} cancelled, ${c.expired} expired), ${c.pending} pending, ${c.running} running`,
    `  cost      $${batch.cost_usd} of $${batch.cost_ceiling_usd} ceiling${batch.max_cost_usd ? `, capped at $${batch.max_cost_usd}` : ''}`,
    ...providerLines(batch),
    ...(batch.routing?.eta != null && batch.finished_at === null
      ? [
          `  eta       ${utc(batch.routing.eta)} (${untilText(batch.routing.eta, Date.now() / 1000)})`,
        ]
      : []),
    ...(batch.waiting ? [`  waiting   ${batch.waiting.code}: ${batch.waiting.message}`] : []),
    ...errorLines(batch.errors ?? []),
    `  created   ${utc(batch.created_at)}`,
    `  deadline  ${utc(batch.deadline_at)} (${timeLeft(batch)})`,
    ...(batch.parent_batch_id ? [`  retry of  ${batch.parent_batch_id}`] : []),
    ...(batch.retried_by?.length ? [`  retried   by ${batch.retried_by.join(', ')}`] : []),
  ].join('\n')
}

/** `  errors    line 3: body.max_tokens must be … (invalid_request)`, one line each, at most ERRORS_SHOWN. */
function errorLines(all: NonNullable<BatchView['errors']>): string[] {
  // A facade file's problems past its 25th are one entry saying how many: told as it is.
  const errors = all.filter((e) => e.code !== MORE_ERRORS)
  const unlisted = all.find((e) => e.code === MORE_ERRORS)
  const lines = errors
    .slice(0, ERRORS_SHOWN)
    .map(
      (e, i) =>
        `  ${i === 0 ? 'errors   ' : '         '} ${e.line !== null ? `line ${e.line}: ` : ''}${e.message} (${e.code})`,
    )
  if (errors.length > ERRORS_SHOWN)
    lines.push(`            …and ${errors.length - ERRORS_SHOWN} more (status --json shows them)`)
  if (unlisted) lines.push(`            ${unlisted.message}`)
  return lines
}

/** `  providers gpu-pool: 9000 ok, 0 failed, 24 running, $0.000000` and one line per further provider. */
function providerLines(batch: BatchView): string[] {
  const entries = Object.entries(batch.routing?.providers ?? {})
  return entries.map(
    ([name, p], i) =>
      `  ${i === 0 ? 'providers' : '         '} ${name}: ${p.succeeded} ok, ${p.failed} failed, ${p.running} running, $${p.cost_usd}` +
      (p.provider_batches === undefined
        ? ''
        : ` (in ${p.provider_batches} provider batch${p.provider_batches === 1 ? '' : 'es'}; live lanes from ${utc(p.fallback_at!)} for lines not ended by then)`),
  )
}

/** One row per batch, columns padded to their widest cell. */
export function table(batches: BatchView[]): string {
  const rows = [
    ['ID', 'NAME', 'STATUS', 'DONE', 'FAILED', 'COST', 'CREATED'],
    ...batches.map((b) => [
      b.id,
      b.name ?? '',
      b.status,
      `${b.request_counts.succeeded + notRun(b.request_counts)}/${b.request_counts.total}`,
      String(notRun(b.request_counts)),
      `$${b.cost_usd}`,
      utc(b.created_at),
    ]),
  ]
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)))
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}
