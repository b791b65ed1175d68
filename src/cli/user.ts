#!/usr/bin/env bun
/**
 * `multigrid`: the user's command line for the native batch API. Submit a JSONL file, watch it
 * run, fetch results. Configured by MULTIGRID_URL and MULTIGRID_API_KEY — read here, on the
 * user's machine; the gateway's own configuration is src/config.ts.
 *
 * Exit codes: 0 done; 1 the gateway refused or could not be reached; 2 bad usage; 3 a waited-for
 * batch ended without completing (cancelled, expired, failed).
 */
import { existsSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { optionProblem } from './option-problem.ts'
import { ApiError, createApi } from './user-api.ts'
import { readEvents } from './event-stream.ts'
import { FINAL_STATUSES, progressLine, summary, table, type BatchView } from './progress.ts'

/** Where the gateway is when MULTIGRID_URL is not set: `npm start`'s own default. */
const DEFAULT_URL = 'http://127.0.0.1:8080'

const USAGE = `usage: multigrid <command> [options]

  submit FILE [--name NAME] [--window-hours N] [--max-cost USD] [--dry-run] [--wait-for-credit]
              [--wait] [--out FILE]
                             submit a JSONL file; prints the batch id. --wait shows progress on
                             stderr until the batch ends (from the gateway's progress stream, or
                             by polling); --out then writes its results there.
                             --max-cost: the batch's spend cap (max_cost_usd).
                             --wait-for-credit: if the credit does not cover it yet, it waits
                             for a deposit (up to half its window) instead of being refused
  status ID [--json]         the batch's counts, cost and time left
  list [--limit N] [--json]  your newest batches
  results ID [--failed | --succeeded] [--input] [--out FILE]
                             results in submitted order (stdout unless --out); --failed keeps the
                             lines that did not run, --input gives them as input lines to resubmit
  cancel ID                  stop a batch: lines already sent finish, the rest end cancelled
  retry ID [--window-hours N] [--max-cost USD] [--wait] [--out FILE]
                             a new batch of the lines of an ended batch that did not succeed;
                             prints its id. --wait and --out as for submit

environment: MULTIGRID_URL (default ${DEFAULT_URL}), MULTIGRID_API_KEY`

const COMMANDS = ['submit', 'status', 'list', 'results', 'cancel', 'retry']

class UsageError extends Error {}

const OPTIONS = {
  name: { type: 'string' },
  'window-hours': { type: 'string' },
  'max-cost': { type: 'string' },
  'dry-run': { type: 'boolean' },
  'wait-for-credit': { type: 'boolean' },
  wait: { type: 'boolean' },
  out: { type: 'string', short: 'o' },
  failed: { type: 'boolean' },
  succeeded: { type: 'boolean' },
  input: { type: 'boolean' },
  json: { type: 'boolean' },
  limit: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

type Api = ReturnType<typeof createApi>
type Flags = ReturnType<
  typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>
>['values']

export async function main(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    return usage(optionProblem(error, OPTIONS))
  }
  const [command, ...rest] = parsed.positionals
  if (parsed.values.help || !command || command === 'help') {
    process.stdout.write(USAGE + '\n')
    return command || parsed.values.help ? 0 : 2
  }
  if (!COMMANDS.includes(command)) return usage(`unknown command ${JSON.stringify(command)}`)
  const key = env.MULTIGRID_API_KEY
  if (!key) return usage('MULTIGRID_API_KEY is not set: export the key your gateway gave you')
  const url = env.MULTIGRID_URL || DEFAULT_URL
  if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url))
    return usage(
      `MULTIGRID_URL must be the gateway's URL, such as ${DEFAULT_URL}; got ${JSON.stringify(url)}`,
    )
  const api = createApi({ url, key })
  try {
    switch (command) {
      case 'submit':
        return await submit(api, one(rest, 'FILE'), parsed.values)
      case 'status':
        return await status(api, one(rest, 'ID'), parsed.values)
      case 'list':
        return await list(api, parsed.values)
      case 'results':
        return await results(api, one(rest, 'ID'), parsed.values)
      case 'retry':
        return await retry(api, one(rest, 'ID'), parsed.values)
      case 'cancel': {
        const batch = await api.json<BatchView>(
          `/v1/batches/${encodeURIComponent(one(rest, 'ID'))}`,
          { method: 'DELETE' },
        )
        process.stderr.write(`${batch.id} is ${batch.status}\n`)
        return 0
      }
      default:
        return usage(`unknown command ${JSON.stringify(command)}`)
    }
  } catch (error) {
    if (error instanceof UsageError) return usage(error.message)
    if (!(error instanceof ApiError)) throw error
    process.stderr.write(`multigrid: ${error.message}\n`)
    if (error.status === null) process.stderr.write(unreachableFix(env.MULTIGRID_URL))
    printIssues(error.body)
    return 1
  }
}

function usage(message: string): number {
  process.stderr.write(`multigrid: ${message}\n\n${USAGE}\n`)
  return 2
}

function one(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected one ${what}`)
  return positionals[0]
}

async function submit(api: Api, file: string, flags: Flags): Promise<number> {
  if (!existsSync(file)) throw new UsageError(`no such file: ${file}`)
  const query = new URLSearchParams()
  if (flags.name) query.set('name', flags.name)
  if (flags['window-hours']) query.set('completion_window_hours', flags['window-hours'])
  if (flags['max-cost']) query.set('max_cost_usd', flags['max-cost'])
  if (flags['dry-run']) query.set('dry_run', 'true')
  if (flags['wait-for-credit']) query.set('wait_for_credit', 'true')
  const response = await api.request(`/v1/batches?${query}`, {
    method: 'POST',
    // The file is streamed from disk; the key makes a retry after a dropped connection safe.
    body: Bun.file(file),
    headers: { 'content-type': 'application/jsonl', 'idempotency-key': crypto.randomUUID() },
  })
  const created = (await response.json()) as BatchView & {
    line_count?: number
    credit_sufficient?: boolean
    daily_limit_sufficient?: boolean
    waiting?: { message: string } | null
  }
  if (flags['dry-run']) {
    process.stdout.write(JSON.stringify(created, null, 2) + '\n')
    return created.credit_sufficient === false || created.daily_limit_sufficient === false ? 1 : 0
  }
  // Admitted to wait for a deposit (docs/open-models.md): nothing is held yet; say how much will be.
  const held = created.waiting
    ? `nothing held yet, $${created.cost_ceiling_usd} once the credit covers it`
    : `$${created.cost_ceiling_usd} held as the cost ceiling`
  const lines = created.request_counts.total
  process.stderr.write(`submitted ${created.id}: ${lines} line${lines === 1 ? '' : 's'}, ${held}\n`)
  if (created.waiting) process.stderr.write(`${created.waiting.message}\n`)
  process.stdout.write(created.id + '\n')
  if (!flags.wait) return 0
  const final = await watch(api, created.id)
  if (flags.out) await download(api, final.id, '', flags.out)
  return final.status === 'completed' ? 0 : 3
}

/**
 * Shows the batch until it ends, then its summary: from the gateway's progress stream (docs/events-and-webhooks.md),
 * resumed with its last id when the connection drops, or by polling when the gateway has no
 * stream or it keeps failing.
 */
async function watch(api: Api, id: string): Promise<BatchView> {
  const show = progressShower()
  const final = (await followStream(api, id, show)) ?? (await poll(api, id, show))
  show.end(final)
  return final
}

/** Reconnections to the stream before `--wait` falls back to polling. */
const STREAM_TRIES = 5

/** The batch's end from its event stream, or null when the stream is not to be had. */
async function followStream(
  api: Api,
  id: string,
  show: (batch: BatchView) => void,
): Promise<BatchView | null> {
  const path = `/v1/batches/${encodeURIComponent(id)}/events`
  let lastId: string | null = null
  let last: BatchView | null = null
  for (let attempt = 1; attempt <= STREAM_TRIES; attempt++) {
    let response: Response
    try {
      response = await api.request(path, {
        headers: { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
      })
    } catch (error) {
      // A gateway without the route answers unknown_route: poll it as before. So does one whose
      // streams this key has all open (429): the batch is followed by polling instead.
      if (error instanceof ApiError && error.status === 404 && isUnknownRoute(error.body))
        return null
      if (error instanceof ApiError && error.status === 429) return null
      if (error instanceof ApiError && error.status !== null && error.status < 500) throw error
      return null
    }
    // Resumed after the end, which was seen: nothing more will come.
    if (response.status === 204 && last) return last
    if (!response.body || !response.headers.get('content-type')?.startsWith('text/event-stream'))
      return null
    try {
      for await (const event of readEvents(response.body)) {
        if (event.event !== 'batch') continue
        const batch = JSON.parse(event.data) as BatchView
        lastId = event.id ?? lastId
        last = batch
        show(batch)
        if (FINAL_STATUSES.includes(batch.status)) return batch
      }
    } catch {
      // The connection broke: resume from the last event.
    }
    await Bun.sleep(Math.min(8_000, 250 * 2 ** attempt))
  }
  return null
}

function isUnknownRoute(body: unknown): boolean {
  return (body as { error?: { code?: string } } | null)?.error?.code === 'unknown_route'
}

/** Polls until the batch ends, paced on X-RateLimit-Remaining. */
async function poll(api: Api, id: string, show: (batch: BatchView) => void): Promise<BatchView> {
  for (;;) {
    const batch = await api.json<BatchView>(`/v1/batches/${encodeURIComponent(id)}`)
    show(batch)
    if (FINAL_STATUSES.includes(batch.status)) return batch
    await api.pace()
  }
}

/**
 * A live bar on a terminal, redrawn in place and fitted to its width (a line that wraps leaves a
 * line per redraw); in a log or a pipe, no redraw: a line per update, only when something other
 * than the clock changed.
 */
function progressShower() {
  const out = process.stderr
  const tty = out.isTTY === true
  let shown = ''
  const show = (batch: BatchView) => {
    const columns = out.columns || process.stdout.columns || (tty ? 80 : undefined)
    if (tty) {
      out.write(`\r${progressLine(batch, { columns })}\x1b[K`)
      return
    }
    const key = JSON.stringify([
      batch.status,
      batch.request_counts,
      batch.cost_usd,
      batch.routing?.eta ?? null,
      batch.waiting?.code ?? null,
    ])
    if (key !== shown) out.write(progressLine(batch, { columns }) + '\n')
    shown = key
  }
  return Object.assign(show, {
    end(batch: BatchView) {
      if (tty) out.write('\n')
      out.write(summary(batch) + '\n')
    },
  })
}

/** A child batch of the lines of ID that did not succeed (docs/events-and-webhooks.md), printed like a submit. */
async function retry(api: Api, id: string, flags: Flags): Promise<number> {
  const body: Record<string, number | string> = {}
  if (flags['max-cost']) body.max_cost_usd = flags['max-cost']
  if (flags['window-hours']) {
    if (!/^\d+$/.test(flags['window-hours']))
      throw new UsageError('--window-hours must be a whole number of hours, 1 to 168')
    body.completion_window_hours = Number(flags['window-hours'])
  }
  const child = await api.json<BatchView>(`/v1/batches/${encodeURIComponent(id)}/retry`, {
    method: 'POST',
    body: JSON.stringify(body),
    // The key makes a retry after a dropped connection return the same child.
    headers: { 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
  })
  process.stderr.write(
    `retrying ${child.request_counts.total} lines of ${id} as ${child.id}, $${child.cost_ceiling_usd} held as the cost ceiling\n`,
  )
  process.stdout.write(child.id + '\n')
  if (!flags.wait) return 0
  const final = await watch(api, child.id)
  if (flags.out) await download(api, final.id, '', flags.out)
  return final.status === 'completed' ? 0 : 3
}

async function status(api: Api, id: string, flags: Flags): Promise<number> {
  const batch = await api.json<BatchView>(`/v1/batches/${encodeURIComponent(id)}`)
  process.stdout.write((flags.json ? JSON.stringify(batch, null, 2) : summary(batch)) + '\n')
  return 0
}

async function list(api: Api, flags: Flags): Promise<number> {
  const limit = flags.limit ?? '20'
  if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 100)
    throw new UsageError('--limit must be 1 to 100')
  const page = await api.json<{ data: BatchView[] }>(`/v1/batches?limit=${limit}`)
  process.stdout.write((flags.json ? JSON.stringify(page.data, null, 2) : table(page.data)) + '\n')
  return 0
}

async function results(api: Api, id: string, flags: Flags): Promise<number> {
  if (flags.failed && flags.succeeded)
    throw new UsageError('choose --failed or --succeeded, not both')
  const query = new URLSearchParams()
  if (flags.failed) query.set('filter', 'failed')
  if (flags.succeeded) query.set('filter', 'succeeded')
  if (flags.input) query.set('format', 'input')
  await download(api, id, query.size > 0 ? `?${query}` : '', flags.out)
  return 0
}

/** Streams the results to a file (or stdout), never holding the whole of them in memory. */
async function download(api: Api, id: string, query: string, out: string | undefined) {
  const response = await api.request(`/v1/batches/${encodeURIComponent(id)}/results${query}`)
  if (out) {
    // Bun.write of an empty body truncates the path without creating it (ENOENT when it is new):
    // `--failed --out` of a batch whose every line succeeded is an empty file, not a crash.
    await Bun.write(out, '')
    const bytes = await Bun.write(out, response)
    process.stderr.write(
      `wrote ${out} (${bytes} bytes, batch ${response.headers.get('x-multigrid-batch-status')})\n`,
    )
  } else {
    await writeToStdout(response)
  }
}

/**
 * The body, chunk by chunk, where the shell pointed standard output: a pipe, a terminal, a file
 * opened with `>>`. (`Bun.write(Bun.stdout, …)` handles it as a file of its own: it truncates it,
 * which fails with EINVAL on a pipe or a terminal when there is nothing to write, and pads a file
 * opened for appending with zero bytes.) A reader that stopped early (`| head`) ends it quietly.
 */
async function writeToStdout(response: Response): Promise<void> {
  const reader = response.body?.getReader()
  if (!reader) return
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    const error = await new Promise<Error | null | undefined>((resolve) =>
      process.stdout.write(read.value, resolve),
    )
    if (!error) continue
    await reader.cancel()
    if ((error as { code?: string }).code === 'EPIPE') return
    throw error
  }
}

/** What to do when no gateway answered at the URL: where that URL came from, and how to set it. */
function unreachableFix(set: string | undefined): string {
  const from = set
    ? 'that URL came from MULTIGRID_URL'
    : 'MULTIGRID_URL is not set: that URL is the default'
  return `    fix: start the gateway, or point MULTIGRID_URL at where it listens, e.g. export MULTIGRID_URL=${DEFAULT_URL} (${from})\n`
}

/** A refused file's line-numbered problems, each with its fix. */
function printIssues(body: unknown) {
  const issues = (
    body as {
      issues?: {
        line: number
        custom_id: string | null
        path: string
        message: string
        fix: string
      }[]
    } | null
  )?.issues
  if (!issues) return
  for (const issue of issues) {
    const where = [issue.custom_id ? `(${issue.custom_id})` : '', issue.path]
      .filter(Boolean)
      .join(' ')
    process.stderr.write(`  line ${issue.line} ${where}: ${issue.message}\n    fix: ${issue.fix}\n`)
  }
  const omitted = (body as { issues_omitted?: number }).issues_omitted ?? 0
  if (omitted > 0) process.stderr.write(`  …and ${omitted} more\n`)
}

if (import.meta.main) process.exit(await main(process.argv.slice(2), process.env))
