/** The user CLI (`multigrid`), spawned as a process against a real gateway and the simulator. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { progressLine } from '../../src/cli/progress.ts'
import { ApiError, createApi, pollDelay } from '../../src/cli/user-api.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { createFacadeBatch } from '../helpers/facade-batch.ts'
import { freePort } from '../helpers/process-gateway.ts'

const CLI = join(import.meta.dir, '../../src/cli/user.ts')

/** Runs the user CLI in `cwd` with PATH and `env` as its whole environment. */
async function runCli(args: string[], cwd: string, env: Record<string, string>) {
  const child = Bun.spawn([process.execPath, CLI, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ])
  return { stdout, stderr, code }
}

describe('multigrid (user CLI)', () => {
  let sim: Simulator
  let gw: TestGateway
  let key = ''
  let dir = ''
  let batchId = ''

  const run = (args: string[], env: Record<string, string> = {}) =>
    runCli(args, dir, { MULTIGRID_URL: gw.url, MULTIGRID_API_KEY: key, ...env })

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 500 })
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1` },
      env: { MULTIGRID_POLL_MS: '50' },
    })
    key = (await gw.newAccount('5')).key
    dir = mkdtempSync(join(tmpdir(), 'mg-cli-'))
  })
  afterAll(async () => {
    await gw.stop()
    await sim.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  test('submit --wait shows progress on stderr, prints the id and writes the results file', async () => {
    const lines = [
      chatLine('t-1', 'first'),
      chatLine('t-2', 'second'),
      chatLine('t-3', 'refused', {}, 'sim/refused'),
    ]
    writeFileSync(join(dir, 'requests.jsonl'), jsonl(lines))
    const { stdout, stderr, code } = await run([
      'submit',
      'requests.jsonl',
      '--name',
      'cli-run',
      '--window-hours',
      '2',
      '--wait',
      '--out',
      'results.jsonl',
    ])
    expect(code).toBe(0)
    batchId = stdout.trim()
    expect(batchId).toMatch(/^batch_[0-9a-f]+$/)
    expect(stderr).toContain(`submitted ${batchId}: 3 lines`)
    expect(stderr).toMatch(/\[[█░]+\]\s+\d+%\s+[0-2]\/3 done · [01] ok/) // the first poll: still running
    expect(stderr).toMatch(/\[█+\] 100%\s+3\/3 done · 2 ok · 1 failed/)
    expect(stderr).toContain(`${batchId}  cli-run  completed`)
    expect(stderr).toContain('wrote results.jsonl')
    // Not a terminal: no redraw, a line per update.
    expect(stderr).not.toContain('\r')
    const written = readFileSync(join(dir, 'results.jsonl'), 'utf8')
    expect(written).toBe(await (await gw.request(`/v1/batches/${batchId}/results`, key)).text())
    expect(
      written
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).custom_id),
    ).toEqual(['t-1', 't-2', 't-3'])
    const batch = (await (await gw.request(`/v1/batches/${batchId}`, key)).json()) as {
      name: string
      completion_window_hours: number
    }
    expect(batch).toMatchObject({ name: 'cli-run', completion_window_hours: 2 })
  })

  test('status, list and results', async () => {
    const status = await run(['status', batchId])
    expect(status.code).toBe(0)
    expect(status.stdout).toContain(`${batchId}  cli-run  completed`)
    // "did not" sums failed, cancelled and expired, each named after it; then waiting and in flight.
    expect(status.stdout).toMatch(
      /lines\s+3: 2 succeeded, 1 did not \(1 failed, 0 cancelled, 0 expired\), 0 pending, 0 running\n/,
    )
    // Where the lines went: every one on the simulator.
    expect(status.stdout).toMatch(/\n  providers sim: 2 ok, 1 failed, 0 running, \$0\.\d{6}/)
    const json = await run(['status', batchId, '--json'])
    expect(JSON.parse(json.stdout)).toMatchObject({ id: batchId, status: 'completed' })

    const list = await run(['list'])
    expect(list.code).toBe(0)
    const [head, row] = list.stdout.trim().split('\n')
    expect(head).toMatch(/^ID\s+NAME\s+STATUS\s+DONE\s+FAILED\s+COST\s+CREATED$/)
    expect(row).toMatch(new RegExp(`^${batchId}\\s+cli-run\\s+completed\\s+3/3\\s+1\\s+\\$`))

    const all = await run(['results', batchId])
    expect(all.stdout).toBe(await (await gw.request(`/v1/batches/${batchId}/results`, key)).text())
    const failed = await run(['results', batchId, '--failed', '--input', '--out', 'retry.jsonl'])
    expect(failed.code).toBe(0)
    expect(readFileSync(join(dir, 'retry.jsonl'), 'utf8')).toBe(
      JSON.stringify(chatLine('t-3', 'refused', {}, 'sim/refused')) + '\n',
    )
  })

  test('results to stdout: nothing to print is no crash, and `>>` appends', async () => {
    // Every line succeeded: `--failed` has nothing to print, to a pipe as to a terminal.
    writeFileSync(join(dir, 'all-fine.jsonl'), jsonl([chatLine('s-1')]))
    const fine = (await run(['submit', 'all-fine.jsonl', '--wait'])).stdout.trim()
    const none = await run(['results', fine, '--failed'])
    expect(none.stderr).toBe('')
    expect(none.code).toBe(0)
    expect(none.stdout).toBe('')
    // The same to a new file with --out: an empty file, exit 0, not a crash on a path not made yet.
    const toFile = await run(['results', fine, '--failed', '--input', '--out', 'nothing.jsonl'])
    expect(toFile.code).toBe(0)
    expect(toFile.stderr).toBe('wrote nothing.jsonl (0 bytes, batch completed)\n')
    expect(readFileSync(join(dir, 'nothing.jsonl'), 'utf8')).toBe('')

    // Standard output opened for appending, as the shell opens it for `>>`: after what was there.
    const path = join(dir, 'appended.jsonl')
    writeFileSync(path, 'earlier\n')
    const append = Bun.spawn(
      [
        'sh',
        '-c',
        `exec "$0" "$1" results "$2" --succeeded >> appended.jsonl`,
        process.execPath,
        CLI,
        batchId,
      ],
      {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', MULTIGRID_URL: gw.url, MULTIGRID_API_KEY: key },
        stderr: 'pipe',
      },
    )
    expect(await new Response(append.stderr).text()).toBe('')
    expect(await append.exited).toBe(0)
    const expected = await (
      await gw.request(`/v1/batches/${batchId}/results?filter=succeeded`, key)
    ).text()
    expect(readFileSync(path, 'utf8')).toBe(`earlier\n${expected}`)
  })

  test('on a 120-column terminal the bar is redrawn in place and never wraps', async () => {
    writeFileSync(
      join(dir, 'tty.jsonl'),
      jsonl([chatLine('p-1', 'one'), chatLine('p-2', 'two'), chatLine('p-3', 'three')]),
    )
    // util-linux `script` gives the CLI a pseudo-terminal, sized as a person's would be.
    const inner = `stty cols 120 rows 40; exec '${process.execPath}' '${CLI}' submit tty.jsonl --wait`
    const child = Bun.spawn(['script', '-qfec', inner, '/dev/null'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', MULTIGRID_URL: gw.url, MULTIGRID_API_KEY: key },
      stdout: 'pipe',
      stderr: 'pipe',
      stdin: 'pipe',
    })
    const [out, code] = await Promise.all([new Response(child.stdout).text(), child.exited])
    expect(code).toBe(0)
    const redraws = out
      .split(/\r|\n/)
      .map((piece) => piece.replaceAll('\x1b[K', ''))
      .filter((piece) => piece.includes(' done · '))
    expect(redraws.length).toBeGreaterThan(0)
    expect(out).toContain('\r[')
    for (const piece of redraws) expect(piece.length).toBeLessThan(120)
    expect(redraws.at(-1)).toMatch(/\[█+\] 100%\s+3\/3 done/)
  })

  test('submit --max-cost caps the batch, and the progress line says why it waits', async () => {
    const lines = Array.from({ length: 4 }, (_, i) => chatLine(`m-${i}`, `capped line ${i}`))
    writeFileSync(join(dir, 'capped.jsonl'), jsonl(lines))
    const quote = (await (
      await gw.request('/v1/batches?dry_run=true', key, { method: 'POST', body: jsonl(lines) })
    ).json()) as { cost_ceiling_usd: string }
    // Room for one line and a half: one runs (500 ms upstream), the others wait for it.
    const cap = ((Number(quote.cost_ceiling_usd) / lines.length) * 1.5).toFixed(6)
    const { stdout, stderr, code } = await run([
      'submit',
      'capped.jsonl',
      '--max-cost',
      cap,
      '--wait',
    ])
    expect(code).toBe(0)
    const id = stdout.trim()
    expect(stderr).toMatch(
      // The ETA, once the pace is measured, stands between the status and the reason.
      / · in_progress( · ETA [^·]+)? · waiting: max_cost_reached \(max_cost_usd \(\$[0-9.]+\) leaves no room/,
    )
    expect(stderr).toContain(`${id}  (unnamed)  completed`)
    expect(stderr).toContain(`capped at $${cap}`)
    const bad = await run(['submit', 'capped.jsonl', '--max-cost', 'lots'])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain('max_cost_usd must be a decimal amount of USD greater than 0')
  })

  test('the progress line shows the ETA once known and the reason while the batch waits', () => {
    // Noon UTC, so that the ETA ten minutes on is shown as a time of the same day.
    const now = Date.UTC(2026, 0, 15, 12, 0, 0) / 1000
    const batch = {
      id: 'batch_1',
      name: null,
      status: 'in_progress',
      created_at: now,
      deadline_at: now + 3 * 3600 + 150,
      finished_at: null,
      request_counts: {
        total: 10,
        pending: 4,
        running: 0,
        succeeded: 5,
        failed: 1,
        cancelled: 0,
        expired: 0,
      },
      cost_usd: '0.000120',
      cost_ceiling_usd: '0.001000',
      routing: { eta: now + 600 },
      waiting: {
        code: 'provider_rate_limited' as const,
        message:
          'sim answered 429; dispatch resumes at 12:04:10 UTC. Nothing to do: do not resubmit.',
        until: now + 10,
      },
    }
    const line = progressLine(batch, { now })
    // The finish as a time and, apart, the time until then; the window's time left named as such.
    expect(line).toContain(` · in_progress · ETA 12:10 UTC (in 10 min) · `)
    // A finish on another day than now carries its date.
    const late = now + 11 * 3600 + 55 * 60
    const tomorrow = {
      ...batch,
      created_at: late,
      deadline_at: late + 3 * 3600,
      routing: { eta: late + 600 },
    }
    expect(progressLine(tomorrow, { now: late })).toContain(
      ' · ETA 2026-01-16 00:05:00 UTC (in 10 min) · ',
    )
    expect(line).toContain(
      ' · waiting: provider_rate_limited (sim answered 429; dispatch resumes at 12:04:10 UTC. Nothing to do: do not resubmit.) · window 3 h 2 min left',
    )
    // Moving again: no reason; not known yet: no ETA.
    const moving = progressLine({ ...batch, waiting: null, routing: { eta: null } }, { now })
    expect(moving).toEndWith('· $0.000120 · in_progress · window 3 h 2 min left')

    // On a 120-column terminal the line fits in 119 (no wrap): the bar narrows, then the reason.
    for (const columns of [120, 80, 60]) {
      const fitted = progressLine(batch, { columns, now })
      expect(fitted.length).toBeLessThan(columns)
      expect(fitted).toContain('6/10 done')
    }
    const wide = progressLine(batch, { columns: 120, now })
    expect(wide).toContain('waiting: provider_rate_limited')
    expect(wide).toContain('ETA ')
    expect(progressLine({ ...batch, waiting: null }, { columns: 120, now })).toEndWith(
      'window 3 h 2 min left',
    )
    expect(progressLine(batch, { columns: 400, now })).toBe(line)
  })

  test('a file with problems: exit 1, each issue with its line and fix', async () => {
    writeFileSync(
      join(dir, 'bad.jsonl'),
      jsonl([chatLine('ok'), chatLine('big', 'x', { max_tokens: 999_999 })]),
    )
    const { code, stderr, stdout } = await run(['submit', 'bad.jsonl'])
    expect(code).toBe(1)
    expect(stdout).toBe('')
    expect(stderr).toContain('1 problem in the file; nothing was submitted')
    expect(stderr).toMatch(/line 2 \(big\) body\.max_tokens: must be at most 4096/)
    expect(stderr).toContain('fix: set max_tokens to 4096 or less')
  })

  test('status of a batch that could not run says why: its errors, one line each', async () => {
    const bad = jsonl([chatLine('ok'), chatLine('big', 'x', { max_tokens: 999_999 })])
    const made = await createFacadeBatch(gw, key, bad)
    expect(made.status).toBe('failed')
    const { code, stdout } = await run(['status', made.id])
    expect(code).toBe(0)
    expect(stdout).toMatch(
      /\n  errors {4}line 2: body\.max_tokens must be at most 4096.*\(invalid_request\)\n/,
    )
  })

  test('submit --wait-for-credit: admitted to wait for a deposit, which it says it needs, then runs', async () => {
    const { accountId, key: poorKey } = await gw.newAccount('0')
    writeFileSync(join(dir, 'poor.jsonl'), jsonl([chatLine('p1')]))
    const refused = await run(['submit', 'poor.jsonl'], { MULTIGRID_API_KEY: poorKey })
    expect(refused.code).toBe(1)
    const { code, stderr, stdout } = await run(['submit', 'poor.jsonl', '--wait-for-credit'], {
      MULTIGRID_API_KEY: poorKey,
    })
    expect(code).toBe(0)
    expect(stderr).toContain(': 1 line, nothing held yet, $0.000093 once the credit covers it')
    expect(stderr).toContain('deposit at least $0.000093 to start it')
    const id = stdout.trim()
    await gw.admin(`/accounts/${accountId}/credits`, { body: { amount_usd: '1' } })
    const watched = await run(['submit', 'poor.jsonl', '--wait'], { MULTIGRID_API_KEY: poorKey })
    expect(watched.code).toBe(0)
    const status = await run(['status', id, '--json'], { MULTIGRID_API_KEY: poorKey })
    expect(['in_progress', 'finalizing', 'completed']).toContain(JSON.parse(status.stdout).status)
  })

  test("usage errors exit 2; a bad key exits 1 with the gateway's message", async () => {
    expect((await run(['status'])).code).toBe(2)
    expect((await run(['frobnicate'])).code).toBe(2)
    const misspelt = await run(['submit', 'requests.jsonl', '--dryrun'])
    expect(misspelt.code).toBe(2)
    expect(misspelt.stderr).toStartWith(
      'multigrid: unknown option --dryrun; did you mean --dry-run?',
    )
    const noKey = await run(['list'], { MULTIGRID_API_KEY: '' })
    expect(noKey.code).toBe(2)
    expect(noKey.stderr).toContain('MULTIGRID_API_KEY is not set')
    const badKey = await run(['list'], { MULTIGRID_API_KEY: 'mg_wrong' })
    expect(badKey.code).toBe(1)
    expect(badKey.stderr).toContain('unknown or revoked API key')
    const help = await run(['--help'])
    expect(help.code).toBe(0)
    expect(help.stdout).toContain('usage: multigrid')
    // An unknown command or flag: the usage, exit 2, no stack trace, key or not.
    for (const args of [['frobnicate'], ['--bogus'], ['list', '--bogus']]) {
      const wrong = await run(args, { MULTIGRID_API_KEY: '' })
      expect(wrong.code).toBe(2)
      expect(wrong.stderr).toContain('usage: multigrid')
      expect(wrong.stderr).not.toMatch(/\n\s+at /)
    }
    expect((await run(['frobnicate'], { MULTIGRID_API_KEY: '' })).stderr).toContain(
      'unknown command "frobnicate"',
    )
  })
})

describe('multigrid --wait and retry, on the progress stream', () => {
  let sim: Simulator
  let gw: TestGateway
  let older: ReturnType<typeof Bun.serve> | null = null
  const logLines: string[] = []
  let key = ''
  let dir = ''

  const run = (args: string[], url = gw.url) =>
    runCli(args, dir, { MULTIGRID_URL: url, MULTIGRID_API_KEY: key })
  /** The routes the gateway served for one batch, in order, from its own request log. */
  const routesOf = (id: string) =>
    logLines
      .map((line) => JSON.parse(line) as { event: string; route?: string; path?: string })
      .filter((entry) => entry.event === 'http.request' && entry.path?.includes(id))
      .map((entry) => entry.route)

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 300 })
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1` },
      env: { MULTIGRID_POLL_MS: '50', LOG_LEVEL: 'info' },
      logLines,
    })
    key = (await gw.newAccount('5')).key
    dir = mkdtempSync(join(tmpdir(), 'mg-cli-events-'))
    // A gateway of an earlier release: the same API, without the progress stream.
    older = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch(request) {
        const url = new URL(request.url)
        if (url.pathname.endsWith('/events'))
          return Response.json(
            {
              error: {
                message: 'no route',
                type: 'not_found_error',
                param: null,
                code: 'unknown_route',
              },
            },
            { status: 404 },
          )
        return fetch(`${gw.url}${url.pathname}${url.search}`, {
          method: request.method,
          headers: request.headers,
          body: request.body,
        })
      },
    })
  })
  afterAll(async () => {
    older?.stop(true)
    await gw.stop()
    await sim.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  test('submit --wait follows the progress stream: one request for the whole wait, no polling', async () => {
    writeFileSync(
      join(dir, 'stream.jsonl'),
      jsonl([chatLine('s-1'), chatLine('s-2'), chatLine('s-3', 'no', {}, 'sim/refused')]),
    )
    const { stdout, stderr, code } = await run(['submit', 'stream.jsonl', '--wait'])
    expect(code).toBe(0)
    const id = stdout.trim()
    expect(stderr).toMatch(/\[█+\] 100%\s+3\/3 done · 2 ok · 1 failed/)
    expect(stderr).toContain(`${id}  (unnamed)  completed`)
    expect(routesOf(id)).toEqual(['/v1/batches/:id/events'])
  })

  test('against a gateway without the stream, --wait polls instead', async () => {
    writeFileSync(join(dir, 'poll.jsonl'), jsonl([chatLine('p-1'), chatLine('p-2')]))
    const { stdout, stderr, code } = await run(
      ['submit', 'poll.jsonl', '--wait'],
      `http://127.0.0.1:${older!.port}`,
    )
    expect(code).toBe(0)
    const id = stdout.trim()
    expect(stderr).toContain(`${id}  (unnamed)  completed`)
    const routes = routesOf(id)
    expect(routes).not.toContain('/v1/batches/:id/events')
    expect(routes.filter((route) => route === '/v1/batches/:id').length).toBeGreaterThanOrEqual(1)
  })

  test('with every progress stream of its key open, --wait polls instead of giving up', async () => {
    const { accountId, key: busyKey } = await gw.newAccount('0')
    const submit = async (file: string, query: string) =>
      (await (
        await gw.request(`/v1/batches?${query}`, busyKey, { method: 'POST', body: file })
      ).json()) as { id: string; cost_ceiling_usd: string }
    // A batch that waits for more credit than will come: its streams stay open.
    const big = jsonl([chatLine('big', 'x', { max_tokens: 4096 })])
    const waiting = await submit(big, 'wait_for_credit=true')
    const small = jsonl([chatLine('w-1')])
    const quote = await submit(small, 'dry_run=true')
    await gw.admin(`/accounts/${accountId}/credits`, {
      body: { amount_usd: quote.cost_ceiling_usd },
    })
    const streams = new AbortController()
    try {
      for (let i = 0; i < 20; i++) {
        const open = await gw.request(`/v1/batches/${waiting.id}/events`, busyKey, {
          signal: streams.signal,
        })
        expect(open.status).toBe(200)
      }
      expect((await gw.request(`/v1/batches/${waiting.id}/events`, busyKey)).status).toBe(429)
      writeFileSync(join(dir, 'busy.jsonl'), small)
      const { stdout, stderr, code } = await runCli(['submit', 'busy.jsonl', '--wait'], dir, {
        MULTIGRID_URL: gw.url,
        MULTIGRID_API_KEY: busyKey,
      })
      expect(code).toBe(0)
      expect(stderr).toContain(`${stdout.trim()}  (unnamed)  completed`)
    } finally {
      streams.abort()
    }
  })

  test('retry ID --wait makes the child of the lines that did not succeed and waits for it', async () => {
    const lines = [chatLine('r-1'), chatLine('r-2', 'no', {}, 'sim/refused'), chatLine('r-3')]
    writeFileSync(join(dir, 'retry-me.jsonl'), jsonl(lines))
    const parent = (await run(['submit', 'retry-me.jsonl', '--wait'])).stdout.trim()

    const { stdout, stderr, code } = await run([
      'retry',
      parent,
      '--wait',
      '--window-hours',
      '3',
      '--max-cost',
      '0.5',
    ])
    // The refused line fails again: the child ends failed, and --wait says so with exit 3.
    expect(code).toBe(3)
    const child = stdout.trim()
    expect(child).toMatch(/^batch_[0-9a-f]+$/)
    expect(stderr).toContain(`retrying 1 lines of ${parent} as ${child}`)
    expect(stderr).toContain(`${child}  (unnamed)  failed`)
    const read = (await (await gw.request(`/v1/batches/${child}`, key)).json()) as {
      parent_batch_id: string
      completion_window_hours: number
      max_cost_usd: string
    }
    expect(read).toMatchObject({
      parent_batch_id: parent,
      completion_window_hours: 3,
      max_cost_usd: '0.5',
    })
    expect(await (await gw.request(`/v1/batches/${child}/results?format=input`, key)).text()).toBe(
      jsonl([lines[1]]),
    )
    expect((await run(['status', child])).stdout).toContain(`retry of  ${parent}`)
    expect((await run(['status', parent])).stdout).toContain(`retried   by ${child}`)

    // A batch whose lines all succeeded: the gateway's refusal, exit 1.
    writeFileSync(join(dir, 'fine.jsonl'), jsonl([chatLine('f-1')]))
    const fine = (await run(['submit', 'fine.jsonl', '--wait'])).stdout.trim()
    const nothing = await run(['retry', fine])
    expect(nothing.code).toBe(1)
    expect(nothing.stderr).toContain('nothing to retry')
    expect((await run(['retry'])).code).toBe(2)
  })
})

describe('pacing on X-RateLimit-Remaining', () => {
  test('the poll interval spreads the remaining budget over the window, keeping a quarter spare', () => {
    expect(pollDelay(600, 60, 1000)).toBe(1000) // plenty left: the minimum
    expect(pollDelay(8, 60, 1000)).toBe(10_000) // 6 usable in 60 s
    expect(pollDelay(1, 30, 1000)).toBe(30_000) // nothing usable: wait for the window to reset
    expect(pollDelay(null, null, 1500)).toBe(1500)
  })

  test('against a gateway: pace() waits out a spent budget, and a 429 waits its Retry-After', async () => {
    const gw = await startTestGateway({ env: { MULTIGRID_DISPATCH: '0' } })
    try {
      const { key } = await gw.newAccount('1', { rate_limit_per_minute: 2 })
      // Rate windows are whole minutes: start well inside one, or its reset is the minimum delay.
      const msLeft = 60_000 - (Date.now() % 60_000)
      if (msLeft < 5_000) await Bun.sleep(msLeft + 100)
      const sleeps: number[] = []
      const api = createApi({ url: gw.url, key, sleep: async (ms) => void sleeps.push(ms) })
      await api.json('/v1/batches')
      await api.pace()
      await api.json('/v1/batches')
      await api.pace()
      // 2 a minute: after the first poll one request is left, none usable with a spare quarter.
      expect(sleeps[0]).toBeGreaterThan(1000)
      expect(sleeps[1]).toBeGreaterThan(1000)
      sleeps.length = 0
      const error = await api.json('/v1/batches').catch((e) => e)
      expect(error).toBeInstanceOf(ApiError)
      expect((error as ApiError).status).toBe(429)
      expect(sleeps.length).toBeGreaterThan(0)
      for (const ms of sleeps) expect(ms).toBeGreaterThanOrEqual(1000) // Retry-After, in seconds
    } finally {
      await gw.stop()
    }
  })
})

describe('a gateway that is not there', () => {
  test('a refused connection fails within a second or two, naming the URL and MULTIGRID_URL', async () => {
    const url = `http://127.0.0.1:${freePort()}`
    const dir = mkdtempSync(join(tmpdir(), 'mg-cli-'))
    try {
      const started = Date.now()
      const { code, stderr } = await runCli(['list'], dir, {
        MULTIGRID_URL: url,
        MULTIGRID_API_KEY: 'mg_any',
      })
      expect(Date.now() - started).toBeLessThan(2_500)
      expect(code).toBe(1)
      expect(stderr).toContain(`cannot reach the gateway at ${url}: connection refused`)
      expect(stderr).toContain('export MULTIGRID_URL=http://127.0.0.1:8080')
      expect(stderr).toContain('that URL came from MULTIGRID_URL')
      // Not a URL at all: said at once, exit 2.
      const bad = await runCli(['list'], dir, {
        MULTIGRID_URL: 'localhost:8080',
        MULTIGRID_API_KEY: 'mg_any',
      })
      expect(bad.code).toBe(2)
      expect(bad.stderr).toContain(`MULTIGRID_URL must be the gateway's URL`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('one quick retry before the gateway ever answered; a gateway that answered and went away gets the backoff', async () => {
    const sleeps: number[] = []
    const sleep = async (ms: number) => void sleeps.push(ms)
    const closed = createApi({ url: `http://127.0.0.1:${freePort()}`, key: 'k', sleep })
    const refused = await closed.json('/v1/batches').catch((e) => e)
    expect(refused).toBeInstanceOf(ApiError)
    expect((refused as ApiError).status).toBeNull()
    expect(sleeps).toEqual([500])

    // A restart under a long --wait: the same refusal, once it has answered, is waited out.
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => Response.json({}) })
    const api = createApi({ url: server.url.href, key: 'k', sleep })
    await api.json('/v1/batches')
    server.stop(true)
    sleeps.length = 0
    expect(await api.json('/v1/batches').catch((e) => e)).toBeInstanceOf(ApiError)
    expect(sleeps).toEqual([1_000, 2_000, 4_000, 8_000, 16_000])
  })
})
