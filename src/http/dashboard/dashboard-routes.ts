/**
 * The dashboard (`/`): a person signs in with an API key and sees their batches, submits a file
 * and downloads results. Every page goes through the same authentication (rate limit, scopes) and every
 * upload through the same admission as `POST /v1/batches`; only the rendering is its own.
 */
import { Elysia } from 'elysia'
import { z } from 'zod'
import { answerOf, unanswered } from '../../admission/admission-answer.ts'
import { keyReusedBatch } from '../../admission/request-hash.ts'
import { isDryRun, isGzipped, submitFile } from '../../admission/submit-file.ts'
import { retryBatch } from '../../admission/retry-batch.ts'
import type { Caller } from '../../auth/authenticate.ts'
import { nowSeconds } from '../../domain.ts'
import { GatewayError, notFound, REFUSALS, refuse } from '../../errors.ts'
import { BodyAborted, readFormBody } from '../../ingest/read-body.ts'
import type { Warning } from '../../ingest/issues.ts'
import type { BodyLimits } from '../body-limits.ts'
import { Money, usd } from '../../money/decimal.ts'
import { excerpt } from '../../excerpt.ts'
import { FILTERS, resultsQuery, submitOptions, type NativeDeps } from '../native-batches.ts'
import { parseFields, parseQuery } from '../parse-query.ts'
import { renderBatch, renderResultLine } from '../render-native.ts'
import { eventStreamResponse } from '../event-stream-response.ts'
import { BATCH_PAGE_SCRIPT, BATCH_PAGE_SCRIPT_PATH } from './batch-page-script.ts'
import { streamLines } from '../stream-lines.ts'
import { htmlResponse, seeOther } from './layout.ts'
import { usagePage } from './usage-page.ts'
import { dayText, readUsageQuery } from '../usage-report.ts'
import { forbiddenOrigin, refusalPage } from './refusal-page.ts'
import { signedInMacro } from './signed-in.ts'
import { batchesPage, batchPage, signInPage, type BatchesPageInput, type Notice } from './pages.ts'
import type { SessionStore, UsageStore } from '../../store/store.ts'
import {
  clearedCookie,
  fromThisOrigin,
  newSession,
  readSessionId,
  sessionCookie,
  sessionHash,
} from './session.ts'
import { batchHref } from './widgets.ts'

const PAGE_SIZE = 50

const signInForm = z.object({ key: z.string().trim().min(1).max(512) })

// The API's own options (name, window, dry run), so a form field obeys the same rule and is
// refused in the same words as the query parameter it stands for.
const submitForm = submitOptions.extend({
  idempotency_key: z
    .string()
    .regex(/^[0-9a-f]{8,64}$/, 'must be the hidden key the form carries (reload the page)')
    .optional(),
})

const listQuery = z.object({ after: z.string().min(1).max(128).optional() })

const retryForm = submitForm.pick({ idempotency_key: true })

type HeaderMap = Record<string, string>

export interface DashboardDeps extends Omit<NativeDeps, 'bodyLimit' | 'retryLimit'> {
  store: NativeDeps['store'] & SessionStore & UsageStore
  /** Writes this instance's buffered usage figures, so the usage page counts its own answers. */
  flushUsage: () => Promise<void>
  bodyLimits: Pick<BodyLimits, 'signIn' | 'dashboardUpload' | 'retry'>
  /** How long a sign-in lasts on the server. */
  sessionHours: number
}

/** What a page's handler is handed: who is signed in, the request, the answer's headers. */
interface Page {
  caller: Caller
  request: Request
  pageHeaders: HeaderMap
}

export function dashboardRoutes(deps: DashboardDeps) {
  const { auth, store, flushUsage, onCancelled } = deps

  // A form's address opened in the address bar (where a refused sign-in or upload leaves the
  // browser) leads back to the page the form is on, not to a JSON 405.
  return new Elysia({ name: 'dashboard' })
    .use(signedInMacro({ auth, store }))
    .get('/', (page) => listPage(store, page, 200), {
      signedIn: { need: 'read', signedOut: () => htmlResponse(200, signInPage()) },
    })
    .get('/dashboard', () => seeOther('/'))
    .get('/dashboard/sign-in', () => seeOther('/'))
    .get('/dashboard/sign-out', () => seeOther('/'))
    .get('/dashboard/batches', () => seeOther('/'))
    .get('/dashboard/batches/:id/cancel', ({ params }) => seeOther(batchHref(params.id)))
    .get('/dashboard/batches/:id/retry', ({ params }) => seeOther(batchHref(params.id)))
    .get(
      '/dashboard/usage',
      async ({ request, caller, pageHeaders }) => {
        const params = new URL(request.url).searchParams
        // Without dates: the last 30 days, today included.
        if (!params.has('from') && !params.has('to')) {
          params.set('to', dayText(Date.now()))
          params.set('from', dayText(Date.now() - 29 * 86_400_000))
        }
        const account = await store.getAccount(caller.account.id)
        try {
          const query = readUsageQuery(params)
          await flushUsage()
          const rows = await store.usageRows(caller.account.id, query.from, query.to)
          return htmlResponse(200, usagePage(account!, rows, query), pageHeaders)
        } catch (error) {
          return refusalPage(error, request, pageHeaders, account!.name)
        }
      },
      { signedIn: 'read' },
    )
    .post('/dashboard/sign-in', ({ request }) => signIn(deps, request), { parse: 'none' })
    .post(
      '/dashboard/sign-out',
      async ({ request }) => {
        if (!fromThisOrigin(request)) return forbiddenOrigin()
        // Ends the session on the server: the same cookie, copied elsewhere, is refused from now on.
        const id = readSessionId(request)
        if (id) await store.deleteSession(sessionHash(id))
        return seeOther('/', { 'set-cookie': clearedCookie(request) })
      },
      { parse: 'none' },
    )
    .post('/dashboard/batches', (page) => submitFromForm(deps, page), {
      parse: 'none',
      signedIn: 'batches',
    })
    .get('/dashboard/batches/:id', async (page) => batchPageResponse(store, page, page.params.id), {
      signedIn: 'read',
    })
    .post(
      '/dashboard/batches/:id/cancel',
      async ({ request, params, caller, pageHeaders }) => {
        const result = await store.cancelBatch(caller.account.id, params.id, nowSeconds())
        if (result.kind === 'not_found')
          return refusalPage(notFound(`batch ${excerpt(params.id)}`), request, pageHeaders)
        if (result.kind === 'cancelled') onCancelled?.(result.batch.id, result.linesCancelled)
        return seeOther(
          `${batchHref(params.id)}${result.kind === 'cancelled' ? '?cancelled=1' : ''}`,
          pageHeaders,
        )
      },
      { parse: 'none', signedIn: 'batches' },
    )
    .get(BATCH_PAGE_SCRIPT_PATH, () => {
      return new Response(BATCH_PAGE_SCRIPT, {
        headers: {
          'content-type': 'text/javascript; charset=utf-8',
          'x-content-type-options': 'nosniff',
          'cache-control': 'no-cache',
        },
      })
    })
    .get(
      '/dashboard/batches/:id/events',
      (page) => batchEvents(deps, page, page.params.id, page.server),
      { signedIn: 'read' },
    )
    .post(
      '/dashboard/batches/:id/retry',
      async (page) => retryFromForm(deps, page, page.params.id),
      { parse: 'none', signedIn: 'batches' },
    )
    .get('/dashboard/batches/:id/results', (page) => resultsDownload(store, page, page.params.id), {
      signedIn: 'read',
    })
}

/** A sign-in: the key checked as an API request would be, then a session for its cookie. */
async function signIn(deps: DashboardDeps, request: Request): Promise<Response> {
  const { auth, store, bodyLimits, sessionHours } = deps
  if (!fromThisOrigin(request)) return forbiddenOrigin()
  let fields: FormData | null
  try {
    fields = await readFormBody(request, bodyLimits.signIn)
  } catch (error) {
    return refusalPage(error, request, {})
  }
  const form = signInForm.safeParse(fields ? textFields(fields) : {})
  if (!form.success)
    return htmlResponse(400, signInPage({ kind: 'error', text: 'Paste an API key to sign in.' }))
  const headers: HeaderMap = {}
  let caller: Caller
  try {
    // The one key read from a form, not a session: the sign-in itself.
    caller = await auth.authenticate(`Bearer ${form.data.key}`, 'read', headers)
  } catch (error) {
    if (error instanceof GatewayError && error.status === 403) {
      const text =
        'This key can neither read nor submit batches (it has only the "inference" scope).'
      return htmlResponse(403, signInPage({ kind: 'error', text }), headers)
    }
    return refusalPage(error, request, headers)
  }
  const session = newSession()
  const now = nowSeconds()
  await store.createSession({
    hash: session.hash,
    keyId: caller.key.id,
    createdAt: now,
    expiresAt: now + sessionHours * 3600,
  })
  return seeOther('/', { 'set-cookie': sessionCookie(session.id, request) })
}

/** A batch's progress stream for its page, ended with the session (sign-out or a revoked key). */
async function batchEvents(
  deps: DashboardDeps,
  page: Page,
  id: string,
  server: Parameters<typeof eventStreamResponse>[1],
): Promise<Response> {
  const { store, events } = deps
  const { caller, request, pageHeaders } = page
  const accountId = caller.account.id
  const batch = await store.getBatch(accountId, id)
  if (!batch) return refusalPage(notFound(`batch ${excerpt(id)}`), request, pageHeaders)
  // The session ends with its key (revoked) or its sign-out: so does the stream.
  const session = sessionHash(readSessionId(request)!)
  try {
    return await eventStreamResponse(request, server, batch, {
      ...events,
      read: () => store.getBatch(accountId, batch.id),
      render: async (latest) =>
        renderBatch(latest, (await store.providerShares([latest.id])).get(latest.id)),
      headers: pageHeaders,
      keyId: caller.key.id,
      check: {
        id: `session:${session}`,
        stillValid: async () => (await store.findSession(session, nowSeconds())) !== null,
        endedBecause: 'the dashboard session ended (signed out, expired or its key revoked)',
      },
    })
  } catch (error) {
    return refusalPage(error, request, pageHeaders)
  }
}

/** A batch's results (or its input, or only the failed lines) as a JSONL download. */
async function resultsDownload(
  store: DashboardDeps['store'],
  page: Page,
  id: string,
): Promise<Response> {
  const { caller, request, pageHeaders } = page
  let query
  try {
    query = parseQuery(resultsQuery, request.url)
  } catch (error) {
    return refusalPage(error, request, pageHeaders)
  }
  const batch = await store.getBatch(caller.account.id, id)
  if (!batch) return refusalPage(notFound(`batch ${excerpt(id)}`), request, pageHeaders)
  const statuses = query.filter ? FILTERS[query.filter] : null
  const render =
    query.format === 'input' ? (line: { input: string }) => line.input : renderResultLine
  const suffix = [query.filter, query.format === 'input' ? 'input' : 'results']
    .filter(Boolean)
    .join('-')
  return new Response(streamLines(store, batch.id, statuses, render), {
    headers: {
      ...pageHeaders,
      'content-type': 'application/jsonl',
      'content-disposition': `attachment; filename="${batch.id}-${suffix}.jsonl"`,
      'x-multigrid-batch-status': batch.status,
      'cache-control': 'no-store',
    },
  })
}

/** The list of batches, with a notice or a file's issues above it. */
async function listPage(
  store: DashboardDeps['store'],
  { caller, request, pageHeaders }: Page,
  status: number,
  extra: Pick<BatchesPageInput, 'notice' | 'issues'> = {},
) {
  const query = listQuery.safeParse(Object.fromEntries(new URL(request.url).searchParams))
  const after = query.success ? (query.data.after ?? null) : null
  const [account, page] = await Promise.all([
    store.getAccount(caller.account.id),
    store.listBatches(caller.account.id, { limit: PAGE_SIZE, after }),
  ])
  const canSubmit = caller.key.scopes.includes('batches')
  return htmlResponse(
    status,
    batchesPage({
      account: account!,
      batches: page.batches,
      hasMore: page.hasMore,
      canSubmit,
      ...extra,
    }),
    pageHeaders,
  )
}

/** The upload form: the same submit as POST /v1/batches (admission/submit-file.ts), answered as a page. */
async function submitFromForm(deps: DashboardDeps, page: Page): Promise<Response> {
  const { store, admission, maxBodyBytes, bodyLimits } = deps
  const { caller, request, pageHeaders } = page
  const fail = (status: number, text: string) =>
    listPage(store, page, status, { notice: { kind: 'error', text } })
  // Read only now, signed in, and within the file limit plus the form's framing: refused
  // from Content-Length before reading, or as a chunked upload passes the limit.
  let fields: FormData | null
  try {
    fields = await readFormBody(request, bodyLimits.dashboardUpload)
  } catch (error) {
    if (!(error instanceof GatewayError) || error instanceof BodyAborted) throw error
    return fail(error.status, error.message)
  }
  if (!fields)
    return fail(400, 'the upload did not arrive as a form; choose a file and submit again')
  const file = fields.get('file')
  if (!(file instanceof Blob) || file.size === 0)
    return fail(400, 'choose a non-empty JSONL file to submit')
  if (file.size > maxBodyBytes)
    return fail(413, `the file is larger than the ${maxBodyBytes}-byte limit`)
  let form: z.output<typeof submitForm>
  try {
    form = parseFields(submitForm, textFields(fields))
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error
    return fail(error.status, error.message)
  }
  const bytes = new Uint8Array(await file.arrayBuffer())
  if (isGzipped(bytes)) return fail(400, 'the file is compressed; upload the JSONL file itself')
  let answer: Awaited<ReturnType<typeof submitFile>>
  try {
    answer = await submitFile(admission, bytes, {
      accountId: caller.account.id,
      name: form.name || null,
      completionWindowHours: form.completion_window_hours,
      idempotencyKey: form.idempotency_key ? `dashboard:${form.idempotency_key}` : null,
      maxCostUsd: form.max_cost_usd ?? null,
      dryRun: isDryRun(form.dry_run),
    })
  } catch (error) {
    // The form's hidden key, sent again with another file (a page restored by Back, say).
    const made = keyReusedBatch(error)
    if (made === null) throw error
    return fail(
      REFUSALS.idempotency_key_reused.status,
      `this form already submitted another file, which made batch ${made}; reload the page to submit this one`,
    )
  }
  switch (answer.kind) {
    case 'quote': {
      const cap = answer.maxCostUsd ? `, capped at $${answer.maxCostUsd}` : ''
      const daily = answer.dailyLimitSufficient
        ? ''
        : ' The account’s daily spend limit would refuse it today.'
      const text = `Quote: ${answer.lineCount} lines, cost ceiling $${answer.costCeilingUsd}${cap}, available credit $${answer.availableUsd} — ${answer.creditSufficient ? 'enough' : 'not enough'} to submit it.${daily} Nothing was stored.${quoteWarnings(answer.warnings, answer.warningsOmitted)}`
      const fits = answer.creditSufficient && answer.dailyLimitSufficient
      return listPage(store, page, 200, { notice: { kind: fits ? 'info' : 'error', text } })
    }
    case 'invalid':
      return listPage(store, page, 400, {
        issues: { issues: answer.issues, omitted: answer.omitted },
      })
    case 'refused':
      return listPage(
        store,
        { ...page, pageHeaders: { ...pageHeaders, ...answer.error.options.headers } },
        answer.error.status,
        { notice: { kind: 'error', text: answer.error.message } },
      )
    case 'batch':
      return seeOther(`${batchHref(answer.batch.id)}?submitted=1`, pageHeaders)
    default:
      return unanswered(answer)
  }
}

/** A batch's page, with the notice its last action left (submitted, retried, cancelled). */
async function batchPageResponse(store: DashboardDeps['store'], page: Page, id: string) {
  const { caller, request, pageHeaders } = page
  const [account, batch, shares] = await Promise.all([
    store.getAccount(caller.account.id),
    store.getBatch(caller.account.id, id),
    store.providerShares([id]),
  ])
  if (!batch)
    return refusalPage(notFound(`batch ${excerpt(id)}`), request, pageHeaders, account!.name)
  const flags = new URL(request.url).searchParams
  let notice: Notice | undefined
  if (flags.has('submitted'))
    notice = {
      kind: 'info',
      text:
        batch.maxCostUsd !== null && new Money(batch.maxCostUsd).lessThan(batch.costCeilingUsd)
          ? `Submitted: ${batch.counts.total} lines, $${usd(batch.maxCostUsd)} held as the spend cap (max_cost_usd; the cost ceiling is $${usd(batch.costCeilingUsd)}).`
          : `Submitted: ${batch.counts.total} lines, $${usd(batch.costCeilingUsd)} held as the cost ceiling.`,
    }
  if (flags.has('retried') && batch.parentBatchId)
    notice = {
      kind: 'info',
      text: `Retrying ${batch.counts.total} line${batch.counts.total === 1 ? '' : 's'} of ${batch.parentBatchId}: $${usd(batch.costCeilingUsd)} held as the cost ceiling.`,
    }
  if (flags.has('cancelled'))
    notice = {
      kind: 'info',
      text: 'Cancel requested: lines already sent finish and are billed, the rest end cancelled.',
    }
  return htmlResponse(
    200,
    batchPage(account!, batch, {
      canChange: caller.key.scopes.includes('batches'),
      message: notice,
      shares: shares.get(batch.id),
    }),
    pageHeaders,
  )
}

/** The retry button: the failed lines again, as POST /v1/batches/{id}/retry makes them. */
async function retryFromForm(deps: DashboardDeps, page: Page, id: string): Promise<Response> {
  const { store, admission, bodyLimits } = deps
  const { caller, request, pageHeaders } = page
  try {
    const fields = await readFormBody(request, bodyLimits.retry)
    const form = parseFields(retryForm, fields ? textFields(fields) : {})
    const result = await retryBatch(store, admission, id, {
      accountId: caller.account.id,
      completionWindowHours: null,
      maxCostUsd: null,
      idempotencyKey: form.idempotency_key ? `dashboard:${form.idempotency_key}` : null,
    })
    const answer = answerOf(result)
    switch (answer.kind) {
      case 'invalid': {
        const [first] = answer.issues
        const count = answer.issues.length + answer.omitted
        throw refuse(
          'invalid_batch_file',
          `${count} of the lines to retry ${count === 1 ? 'is' : 'are'} no longer valid, nothing was submitted; line ${first!.line} (${first!.custom_id ?? ''}) ${first!.path}: ${first!.message} — ${first!.fix}`,
        )
      }
      case 'refused':
        throw answer.error
      case 'batch':
        return seeOther(`${batchHref(answer.batch.id)}?retried=1`, pageHeaders)
      default:
        return unanswered(answer)
    }
  } catch (error) {
    return refusalPage(error, request, pageHeaders)
  }
}

/** The form's non-empty text fields (an empty input counts as absent). */
function textFields(form: FormData): Record<string, string> {
  const fields: Record<string, string> = {}
  form.forEach((value, name) => {
    if (typeof value === 'string' && value !== '') fields[name] = value
  })
  return fields
}

/** A dry run's warnings in a sentence each: the line, the field and what may happen. */
function quoteWarnings(warnings: readonly Warning[], omitted: number): string {
  if (warnings.length === 0) return ''
  const listed = warnings.map((w) => ` Line ${w.line} (${w.param}): ${w.message}; ${w.fix}.`)
  return ` Warnings:${listed.join('')}${omitted > 0 ? ` And ${omitted} more.` : ''}`
}
