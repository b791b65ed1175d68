/** How the user CLI shows a batch: a progress line while it runs, a summary when asked. */
import type { BatchWaiting, RequestCounts } from '../domain.ts'

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
  /** SPEC §15: absent from a gateway without retries. */
  parent_batch_id?: string | null
  retried_by?: string[]
  /** Absent from gateways older than SPEC §12–13's fields. */
  max_cost_usd?: string | null
  routing?: {
    providers?: Record<
      string,
      { succeeded: number; failed: number; running: number; cost_usd: string }
    >
    eta: number | null
  }
  waiting?: BatchWaiting | null
}

export const FINAL_STATUSES = ['completed', 'failed', 'cancelled', 'expired']

const notRun = (c: BatchView['request_counts']) => c.failed + c.cancelled + c.expired

export function timeLeft(batch: BatchView, now = Date.now() / 1000): string {
  if (batch.finished_at !== null) return 'finished'
  const seconds = Math.floor(batch.deadline_at - now)
  if (seconds <= 0) return 'window ended'
  const h = Math.floor(seconds / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  return h > 0 ? `${h} h ${m} min left` : m > 0 ? `${m} min left` : `${seconds} s left`
}

/**
 * `[██████░░░░]  60%  6/10 done · 5 ok · 1 failed · $0.000120 · in_progress · ETA 14:05 UTC ·
 * waiting: provider_rate_limited (openai answered 429; …) · 3 h 2 min left` — the ETA once the
 * gateway can tell, the reason only while the batch waits; the time left stays last.
 */
export function progressLine(batch: BatchView, width = 24): string {
  const c = batch.request_counts
  const done = c.succeeded + notRun(c)
  const filled = c.total === 0 ? width : Math.round((done / c.total) * width)
  const percent = c.total === 0 ? 100 : Math.floor((done / c.total) * 100)
  const bar = '█'.repeat(filled) + '░'.repeat(width - filled)
  const parts = [
    `[${bar}] ${String(percent).padStart(3)}%  ${done}/${c.total} done`,
    `${c.succeeded} ok`,
    `${notRun(c)} failed`,
    `$${batch.cost_usd}`,
    batch.status,
  ]
  const eta = batch.routing?.eta ?? null
  if (eta !== null && batch.finished_at === null) parts.push(`ETA ${clock(eta)}`)
  if (batch.waiting) parts.push(`waiting: ${batch.waiting.code} (${batch.waiting.message})`)
  parts.push(timeLeft(batch))
  return parts.join(' · ')
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
    `  lines     ${c.total}: ${c.succeeded} succeeded, ${notRun(c)} failed (${c.failed} failed, ${c.cancelled} cancelled, ${c.expired} expired), ${c.pending + c.running} pending`,
    `  cost      $${batch.cost_usd} of $${batch.cost_ceiling_usd} ceiling${batch.max_cost_usd ? `, capped at $${batch.max_cost_usd}` : ''}`,
    ...providerLines(batch),
    ...(batch.routing?.eta != null && batch.finished_at === null
      ? [`  eta       ${utc(batch.routing.eta)}`]
      : []),
    ...(batch.waiting ? [`  waiting   ${batch.waiting.code}: ${batch.waiting.message}`] : []),
    `  created   ${utc(batch.created_at)}`,
    `  deadline  ${utc(batch.deadline_at)} (${timeLeft(batch)})`,
    ...(batch.parent_batch_id ? [`  retry of  ${batch.parent_batch_id}`] : []),
    ...(batch.retried_by?.length ? [`  retried   by ${batch.retried_by.join(', ')}`] : []),
  ].join('\n')
}

/** `  providers gpu-pool: 9000 ok, 0 failed, 24 running, $0.000000` and one line per further provider. */
function providerLines(batch: BatchView): string[] {
  const entries = Object.entries(batch.routing?.providers ?? {})
  return entries.map(
    ([name, p], i) =>
      `  ${i === 0 ? 'providers' : '         '} ${name}: ${p.succeeded} ok, ${p.failed} failed, ${p.running} running, $${p.cost_usd}`,
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
