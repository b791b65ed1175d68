/** Small pieces of the dashboard's pages: progress, money, times, the upload form. */
import { randomBytes } from 'node:crypto'
import type { BatchRecord, RequestCounts } from '../../domain.ts'
import { batchHold, Money, usd } from '../../money/decimal.ts'
import { html, type Html } from './html.ts'

/** Lines that did not run, as `?filter=failed` counts them. */
export const notRun = (counts: RequestCounts) => counts.failed + counts.cancelled + counts.expired

const percent = (part: number | string | Money, whole: number | string | Money) => {
  const w = new Money(whole)
  if (w.lessThanOrEqualTo(0)) return '0'
  return Money.min(100, new Money(part).dividedBy(w).times(100)).toFixed(2)
}

/** Succeeded, did not run, running, pending: one bar, in that order. */
export function progressBar(counts: RequestCounts, big = false): Html {
  const segments: [string, number, string][] = [
    ['ok', counts.succeeded, 'succeeded'],
    ['bad', notRun(counts), 'failed'],
    ['run', counts.running, 'running'],
  ]
  const label = progressText(counts)
  return html`<div
    class="bar${big ? ' big' : ''}"
    role="img"
    aria-label="${label}"
    title="${label}"
  >
    ${segments.map(([kind, count, name]) =>
      count > 0
        ? html`<span
            class="${kind}"
            style="width:${percent(count, counts.total)}%"
            title="${count} ${name}"
          ></span>`
        : '',
    )}
  </div>`
}

export function progressText(counts: RequestCounts): string {
  const pending = counts.pending + counts.running
  return `${counts.succeeded} succeeded · ${notRun(counts)} failed · ${pending} pending of ${counts.total}`
}

/** What was spent so far against what was held, as a bar and in words. */
/** The cost against what the batch may spend: its ceiling, or its spend cap when that is lower. */
export function costBar(batch: BatchRecord): Html {
  const most = batchHold(batch.costCeilingUsd, batch.maxCostUsd)
  return html`<div class="bar" role="img" aria-label="cost">
    <span class="cost" style="width:${percent(batch.costUsd, most)}%"></span>
  </div>`
}

export const costText = (batch: BatchRecord) =>
  `$${usd(batch.costUsd)} of $${usd(batch.costCeilingUsd)} ceiling` +
  (batch.maxCostUsd === null ? '' : `, capped at $${usd(batch.maxCostUsd)} (max_cost_usd)`)

export function timeLeft(batch: BatchRecord, now = Math.floor(Date.now() / 1000)): string {
  if (batch.finishedAt !== null) return 'finished'
  const seconds = batch.deadlineAt - now
  if (seconds <= 0) return 'window ended'
  const d = Math.floor(seconds / 86_400)
  const h = Math.floor((seconds % 86_400) / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  if (d > 0) return `${d} d ${h} h left`
  if (h > 0) return `${h} h ${m} min left`
  if (m > 0) return `${m} min left`
  return `${seconds} s left`
}

/** Unix seconds as a UTC time; the pages have no script to know the reader's zone. */
export const utc = (seconds: number | null) =>
  seconds === null
    ? '—'
    : new Date(seconds * 1000).toISOString().slice(0, 16).replace('T', ' ') + ' UTC'

export const statusBadge = (status: string) =>
  html`<span class="status ${status}">${status.replace('_', ' ')}</span>`

export const batchHref = (id: string) => `/dashboard/batches/${encodeURIComponent(id)}`

/**
 * The upload form. Its hidden idempotency key makes a double click, or a post the browser
 * retries, submit the batch once.
 */
export function submitForm(): Html {
  return html`<form method="post" action="/dashboard/batches" enctype="multipart/form-data">
    <label for="file">JSONL file</label>
    <input
      id="file"
      name="file"
      type="file"
      accept=".jsonl,.ndjson,.txt,application/jsonl,application/x-ndjson,text/plain"
      required
    />
    <label for="name">Name</label>
    <input id="name" name="name" type="text" maxlength="256" placeholder="nightly-triage" />
    <label for="window">Completion window (hours, 1–168)</label>
    <input
      id="window"
      name="completion_window_hours"
      type="number"
      min="1"
      max="168"
      value="24"
      required
    />
    <label for="max-cost">Spend cap (USD, optional: max_cost_usd)</label>
    <input id="max-cost" name="max_cost_usd" type="text" inputmode="decimal" placeholder="5" />
    <label
      ><input name="dry_run" type="checkbox" value="true" /> Only quote it: validate and price,
      store nothing</label
    >
    <input type="hidden" name="idempotency_key" value="${randomBytes(12).toString('hex')}" />
    <p><button type="submit">Submit batch</button></p>
  </form>`
}

/**
 * Retry as a child batch (docs/events-and-webhooks.md): one button, with a hidden idempotency key like the upload
 * form's, so a double click makes one child.
 */
export function retryForm(batch: BatchRecord): Html {
  const count = notRun(batch.counts)
  return html`<form method="post" action="${batchHref(batch.id)}/retry">
    <input type="hidden" name="idempotency_key" value="${randomBytes(12).toString('hex')}" />
    <button id="retry" type="submit">
      Retry the ${count} line${count === 1 ? '' : 's'} that did not succeed
    </button>
  </form>`
}
