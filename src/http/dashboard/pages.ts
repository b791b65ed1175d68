/** The dashboard's pages, rendered on the server from stored records. */
import { isOpenBatch, MORE_ERRORS, type BatchRecord, type ProviderShare } from '../../domain.ts'
import type { Issue } from '../../ingest/issues.ts'
import { availableUsd, usd } from '../../money/decimal.ts'
import type { AccountView } from '../../store/store.ts'
import { html, type Html } from './html.ts'
import { layout } from './layout.ts'
import { BATCH_PAGE_SCRIPT_PATH } from './batch-page-script.ts'
import { usageSection } from './usage-section.ts'
import { routingSection } from './routing-section.ts'
import {
  batchHref,
  costBar,
  costText,
  notRun,
  progressBar,
  progressText,
  retryForm,
  statusBadge,
  submitForm,
  timeLeft,
  utc,
} from './widgets.ts'

/** A running batch's page reloads this often in a browser without scripts. */
export const REFRESH_SECONDS = 2

export interface Notice {
  kind: 'info' | 'error'
  text: string
}

const notice = (n: Notice | undefined) =>
  n
    ? html`<div class="notice${n.kind === 'error' ? ' error' : ''}" role="status">${n.text}</div>`
    : ''

export function signInPage(message?: Notice): Html {
  return layout(
    { title: 'Sign in' },
    html`<section>
      <h1>Sign in</h1>
      ${notice(message)}
      <p class="dim">
        Paste an API key of your account. The key is checked by this gateway and not stored in the
        browser: the cookie holds only a random session id, which ends when you sign out, when the
        browser closes, or when the key is revoked.
      </p>
      <form method="post" action="/dashboard/sign-in">
        <label for="key">API key</label>
        <input id="key" name="key" type="password" autocomplete="off" required placeholder="mg_…" />
        <p><button type="submit">Sign in</button></p>
      </form>
    </section>`,
  )
}

export interface BatchesPageInput {
  account: AccountView
  batches: BatchRecord[]
  hasMore: boolean
  canSubmit: boolean
  notice?: Notice
  issues?: { issues: Issue[]; omitted: number }
}

export function batchesPage(input: BatchesPageInput): Html {
  const { account, batches } = input
  const available = availableUsd(account)
  const rows = batches.map(
    (b) =>
      html`<tr data-batch="${b.id}">
        <td>
          <a href="${batchHref(b.id)}">${b.name ?? '(unnamed)'}</a>
          <div class="mono dim">${b.id}</div>
        </td>
        <td>${statusBadge(b.status)}</td>
        <td>
          ${progressBar(b.counts)}
          <div class="small dim">${progressText(b.counts)}</div>
        </td>
        <td class="small">${costText(b)}</td>
        <td class="small">
          ${utc(b.createdAt)}
          <div class="dim">${timeLeft(b)}</div>
        </td>
      </tr>`,
  )
  const last = batches.at(-1)
  return layout(
    { title: 'Batches', account: account.name },
    html`${notice(input.notice)}
      ${input.issues ? issuesSection(input.issues.issues, input.issues.omitted) : ''}
      <section>
        <h1>Batches</h1>
        <p class="small dim">
          Account <b>${account.name}</b> · available credit $${usd(available)} ·
          ${account.openBatches} of ${account.maxOpenBatches} open batches
        </p>
        ${
          batches.length === 0
            ? html`<p class="dim">No batches yet.</p>`
            : html`<table>
                <thead>
                  <tr>
                    <th>Name</th>
                    <th>Status</th>
                    <th>Progress</th>
                    <th>Cost</th>
                    <th>Created · window</th>
                  </tr>
                </thead>
                <tbody>
                  ${rows}
                </tbody>
              </table>`
        }
        ${input.hasMore && last ? html`<p><a href="/?after=${encodeURIComponent(last.id)}">Older batches →</a></p>` : ''}
      </section>
      ${
        input.canSubmit
          ? html`<section>
              <h2>Submit a batch</h2>
              ${submitForm()}
            </section>`
          : html`<section class="dim small">
              This key may read batches but not submit them (it lacks the "batches" scope).
            </section>`
      }`,
  )
}

function issuesSection(issues: Issue[], omitted: number): Html {
  const count = issues.length + omitted
  return html`<section class="issues">
    <h2>${count} problem${count === 1 ? '' : 's'} in the file; nothing was submitted</h2>
    <table>
      <thead>
        <tr>
          <th>Line</th>
          <th>custom_id</th>
          <th>Where</th>
          <th>Problem</th>
          <th>Fix</th>
        </tr>
      </thead>
      <tbody>
        ${issues.map(
          (i) =>
            html`<tr>
              <td>${i.line}</td>
              <td class="mono">${i.custom_id ?? ''}</td>
              <td class="mono">${i.path}</td>
              <td>${i.message}</td>
              <td>${i.fix}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${omitted > 0 ? html`<p class="dim small">…and ${omitted} more.</p>` : ''}
  </section>`
}

/** Errors shown at most on a batch's page; the batch object has them all. */
const ERRORS_SHOWN = 25

/** Why a batch could not run (its `errors`: a facade file's problems, no credit or capacity in time). */
function errorsSection(batch: BatchRecord): Html | '' {
  const all = batch.errors ?? []
  if (all.length === 0) return ''
  // A facade file's problems past its 25th are one entry saying how many: told as it is.
  const errors = all.filter((e) => e.code !== MORE_ERRORS)
  const unlisted = all.find((e) => e.code === MORE_ERRORS)
  const more = errors.length - ERRORS_SHOWN
  return html`<section id="errors">
    <h2>Why it did not run</h2>
    <ul>
      ${errors.slice(0, ERRORS_SHOWN).map(
        (e) =>
          html`<li>
            ${e.line !== null ? html`line ${e.line}: ` : ''}${e.message}
            <span class="mono dim small">${e.code}</span>
          </li>`,
      )}
    </ul>
    ${more > 0 ? html`<p class="dim small">…and ${more} more (GET /v1/batches/${batch.id}).</p>` : ''}
    ${unlisted ? html`<p class="dim small">${unlisted.message}</p>` : ''}
  </section>`
}

/** What a batch's page shows beside the batch itself. */
export interface BatchPageView {
  /** Whether the key may cancel and retry (the `batches` scope). */
  canChange: boolean
  message?: Notice
  /** Where the batch's lines went, per provider (BatchStore.providerShares). */
  shares?: Record<string, ProviderShare>
}

export function batchPage(account: AccountView, batch: BatchRecord, view: BatchPageView): Html {
  const { canChange, message } = view
  const shares = view.shares ?? {}
  const open = isOpenBatch(batch.status)
  const c = batch.counts
  const base = `${batchHref(batch.id)}/results`
  // Its progress stream, from the state this page shows (batch-page-script.ts).
  const events = `${batchHref(batch.id)}/events?last_event_id=${batch.version}`
  return layout(
    {
      title: batch.name ?? batch.id,
      account: account.name,
      refreshSeconds: open ? REFRESH_SECONDS : undefined,
      refreshUrl: batchHref(batch.id),
      script: open ? BATCH_PAGE_SCRIPT_PATH : undefined,
    },
    html`<p class="small"><a href="/">← All batches</a></p>
      ${notice(message)}
      <section data-batch="${batch.id}" ${open ? html`data-events="${events}"` : ''}>
        <h1>${batch.name ?? '(unnamed)'} ${statusBadge(batch.status)}</h1>
        <p class="mono dim">${batch.id} · ${batch.endpoint}</p>
        ${lineage(batch)} ${progressBar(c, true)}
        <p id="progress">${progressText(c)}</p>
        <div class="grid">
          <div>
            <span class="dim small">Succeeded</span><b id="count-succeeded">${c.succeeded}</b>
          </div>
          <div>
            <span class="dim small">Failed</span
            ><b id="count-failed">${notRun(c)}</b
            >${c.cancelled + c.expired > 0 ? html`<span class="dim small">${c.failed} failed, ${c.cancelled} cancelled, ${c.expired} expired</span>` : ''}
          </div>
          <div>
            <span class="dim small">Pending</span
            ><b id="count-pending">${c.pending + c.running}</b
            >${c.running > 0 ? html`<span class="dim small">${c.running} running</span>` : ''}
          </div>
          <div><span class="dim small">Lines</span><b>${c.total}</b></div>
        </div>
      </section>
      ${errorsSection(batch)} ${routingSection(batch, shares)}
      <section>
        <h2>Cost</h2>
        ${costBar(batch)}
        <p id="cost">${costText(batch)}</p>
        <p class="small dim">
          The ceiling is held from the account's credit while the batch runs; each line is billed
          from the usage its provider reports, and what is left of the hold is released at the end.
        </p>
      </section>
      ${usageSection(batch)}
      <section>
        <h2>Window</h2>
        <p id="time-left"><b>${timeLeft(batch)}</b></p>
        <p class="small dim">
          Created ${utc(batch.createdAt)} · started ${utc(batch.startedAt)} · deadline
          ${utc(batch.deadlineAt)} · finished ${utc(batch.finishedAt)}
        </p>
        ${open ? html`<p class="small dim">This page follows the batch while it runs.</p>` : ''}
        ${
          canChange && open && batch.status !== 'cancelling'
            ? html`<form method="post" action="${batchHref(batch.id)}/cancel">
                <button class="danger" type="submit">Cancel batch</button>
              </form>`
            : ''
        }
      </section>
      ${
        canChange && !open && notRun(c) > 0 && batch.purgedAt === null
          ? html`<section>
              <h2>Retry</h2>
              <p class="small dim">
                A new batch of the lines that failed, were cancelled or expired, with the same
                custom_ids and bodies, checked and held like any submit.
              </p>
              ${retryForm(batch)}
            </section>`
          : ''
      }
      <section class="downloads">
        <h2>Results</h2>
        <p class="small dim">
          One line per input line, in the order submitted; downloadable while the batch runs.
        </p>
        <a id="download-results" href="${base}">All results (.jsonl)</a>
        <a id="download-failed" href="${base}?filter=failed">Failed lines (.jsonl)</a>
        <a id="download-failed-input" href="${base}?filter=failed&amp;format=input"
          >Failed lines as input, to resubmit (.jsonl)</a
        >
      </section>`,
  )
}

export function messagePage(
  title: string,
  message: Notice,
  account?: string,
  refreshSeconds?: number,
): Html {
  return layout(
    { title, account, refreshSeconds },
    html`<section>
      <h1>${title}</h1>
      ${notice(message)}
      <p><a href="/">Back to the dashboard</a></p>
    </section>`,
  )
}

/** Where a retry came from and what retried it (docs/events-and-webhooks.md). */
function lineage(batch: BatchRecord): Html | string {
  const parts: Html[] = []
  if (batch.parentBatchId)
    parts.push(
      html`Retry of
        <a id="parent-batch" class="mono" href="${batchHref(batch.parentBatchId)}"
          >${batch.parentBatchId}</a
        >`,
    )
  if (batch.retriedBy.length > 0)
    parts.push(
      html`Retried by
      ${batch.retriedBy.map(
        (id, i) =>
          html`${i > 0 ? ', ' : ''}<a class="mono retried-by" href="${batchHref(id)}">${id}</a>`,
      )}`,
    )
  return parts.length > 0
    ? html`<p class="small">${parts.map((p, i) => html`${i > 0 ? ' · ' : ''}${p}`)}</p>`
    : ''
}
