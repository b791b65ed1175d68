/**
 * The dashboard end to end in headless Chromium (Debian's /usr/bin/chromium, driven by
 * playwright-core): sign in, submit a file, watch the batch complete against the simulator,
 * check progress and cost, download results. Then the refusals, over plain HTTP.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { createFacadeBatch } from '../helpers/facade-batch.ts'

const CHROMIUM = '/usr/bin/chromium'
const OUT = join(import.meta.dir, '../out')

type Batch = {
  id: string
  status: string
  waiting?: { code: string; message: string } | null
  cost_usd: string
  cost_ceiling_usd: string
  request_counts: Record<string, number>
}

/** Reads a selector's text across the page's own reloads (meta refresh), bounded in time. */
async function waitForText(
  page: Page,
  selector: string,
  wanted: RegExp,
  timeoutMs = 30_000,
): Promise<string> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    try {
      last = (await page.locator(selector).textContent({ timeout: 1_000 })) ?? ''
      if (wanted.test(last)) return last
    } catch {
      // The page was reloading; read again.
    }
    await Bun.sleep(200)
  }
  throw new Error(`timed out waiting for ${selector} to match ${wanted}; last text: ${last}`)
}

describe('dashboard in headless Chromium', () => {
  let sim: Simulator
  let gw: TestGateway
  let context: BrowserContext
  let page: Page
  let key = ''
  let work = ''

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `Chromium is not installed at ${CHROMIUM}: install it with "apt-get install -y chromium" (.ci/run does) to run the dashboard test`,
      )
    }
    // Slow enough that the batch is seen running before it completes.
    sim = await startSimulator({ latencyMs: 1_500 })
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1` },
      env: { MULTIGRID_POLL_MS: '50' },
    })
    key = (await gw.newAccount('5')).key
    work = mkdtempSync(join(tmpdir(), 'mg-dashboard-'))
    context = await chromium.launchPersistentContext(join(work, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      acceptDownloads: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    })
    page = context.pages()[0] ?? (await context.newPage())
  })
  afterAll(async () => {
    await context?.close()
    await gw?.stop()
    await sim?.stop()
    if (work) rmSync(work, { recursive: true, force: true })
  })

  test('sign in, submit a file, watch it complete, check progress and cost, download results', async () => {
    await page.goto(`${gw.url}/`)
    expect(await page.locator('h1').textContent()).toBe('Sign in')
    await page.fill('#key', key)
    await page.click('button[type=submit]')
    await page.waitForURL(`${gw.url}/`)
    expect(await page.locator('h1').textContent()).toBe('Batches')
    expect(await page.textContent('main')).toContain('No batches yet.')

    // A session id (never the key) lives in a cookie the page cannot read and other sites do not get.
    const [cookie] = await context.cookies(gw.url)
    expect(cookie).toMatchObject({
      name: 'multigrid_session',
      httpOnly: true,
      sameSite: 'Strict',
    })
    expect(cookie!.value).toStartWith('mgs_')
    expect(cookie!.value).not.toContain(key)

    const file = join(work, 'requests.jsonl')
    const lines = [
      ...Array.from({ length: 5 }, (_, i) =>
        chatLine(`ticket-${i + 1}`, `classify ticket ${i + 1}`),
      ),
      chatLine('ticket-6', 'refused upstream', {}, 'sim/refused'),
    ]
    writeFileSync(file, jsonl(lines))
    await page.setInputFiles('#file', file)
    await page.fill('#name', 'nightly <triage> & co')
    await page.fill('#window', '6')
    await page.click('form[action="/dashboard/batches"] button[type=submit]')
    await page.waitForURL(/\/dashboard\/batches\/batch_[0-9a-f]+\?submitted=1$/)
    const id = /batch_[0-9a-f]+/.exec(page.url())![0]

    // Running: the page says so and follows the batch's progress stream, without reloading
    // (the refresh is for browsers without scripts only).
    expect(await page.locator('h1').textContent()).toBe('nightly <triage> & co in progress')
    expect(await page.textContent('#eta')).toBe('ETA not known yet')
    expect(await page.locator('meta[http-equiv=refresh]').count()).toBe(0)
    expect(await page.locator('script[src="/dashboard/assets/batch-page.js"]').count()).toBe(1)
    await page.evaluate(
      () => ((window as unknown as { sameDocument: boolean }).sameDocument = true),
    )
    expect(await page.textContent('[role=status]')).toContain('Submitted: 6 lines')
    expect(await page.textContent('#time-left')).toMatch(/^[56] h \d+ min left$/)

    const progress = await waitForText(
      page,
      '#progress',
      /^5 succeeded · 1 failed · 0 pending of 6$/,
    )
    expect(progress).toBe('5 succeeded · 1 failed · 0 pending of 6')
    await waitForText(page, 'h1', /completed$/)
    // Updated in place from the stream: the same document, its notice kept, the server's own
    // rendering of each state put in.
    expect(
      await page.evaluate(() => (window as unknown as { sameDocument?: boolean }).sameDocument),
    ).toBe(true)
    expect(await page.textContent('[role=status]')).toContain('Submitted: 6 lines')
    expect(page.url()).toBe(`${gw.url}/dashboard/batches/${id}?submitted=1`)
    expect(Number(await page.getAttribute('html', 'data-batch-version'))).toBeGreaterThan(0)
    expect(await page.textContent('#count-succeeded')).toBe('5')
    expect(await page.textContent('#count-failed')).toBe('1')
    expect(await page.textContent('#count-pending')).toBe('0')
    expect(await page.textContent('#time-left')).toBe('finished')

    // Where the lines went: every one on the simulator, as the API's routing.providers says.
    const providers = page.locator('#providers tr[data-provider="sim"] td')
    expect(await providers.allTextContents()).toEqual([
      expect.stringContaining('sim'),
      '5',
      '1',
      '0',
      expect.stringMatching(/^\$0\.\d{6,}$/),
    ] as unknown as string[])
    expect(await page.locator('#provider-bar span.p0').count()).toBe(1)
    expect(await page.getAttribute('#provider-bar', 'aria-label')).toBe('sim: 6')
    expect(await page.textContent('#eta')).toMatch(/^ETA finished \d{4}-\d\d-\d\d \d\d:\d\d/)
    expect(await page.locator('#waiting').count()).toBe(0)

    // Cost so far against the ceiling: exactly what the API reports.
    const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
    expect(batch.status).toBe('completed')
    expect(await page.textContent('#cost')).toBe(
      `$${batch.cost_usd} of $${batch.cost_ceiling_usd} ceiling`,
    )

    mkdirSync(OUT, { recursive: true })
    await page.screenshot({ path: join(OUT, 'dashboard.png'), fullPage: true })

    // Downloads: the same bytes as the API's results, and the failed lines alone.
    const expected = await (await gw.request(`/v1/batches/${id}/results`, key)).text()
    const [all] = await Promise.all([
      page.waitForEvent('download'),
      page.click('#download-results'),
    ])
    expect(all.suggestedFilename()).toBe(`${id}-results.jsonl`)
    expect(readFileSync((await all.path())!, 'utf8')).toBe(expected)
    const [failed] = await Promise.all([
      page.waitForEvent('download'),
      page.click('#download-failed'),
    ])
    const failedLines = readFileSync((await failed.path())!, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(failedLines).toHaveLength(1)
    expect(failedLines[0]).toMatchObject({
      custom_id: 'ticket-6',
      line: 6,
      status: 'failed',
      error: { code: 'invalid_request' },
    })
    const [input] = await Promise.all([
      page.waitForEvent('download'),
      page.click('#download-failed-input'),
    ])
    expect(readFileSync((await input.path())!, 'utf8')).toBe(JSON.stringify(lines[5]) + '\n')

    // Retry as a child batch: one button for the line that did not succeed.
    expect((await page.textContent('#retry'))!.trim()).toBe('Retry the 1 line that did not succeed')
    await page.click('#retry')
    await page.waitForURL(/\/dashboard\/batches\/batch_[0-9a-f]+\?retried=1$/)
    const child = /batch_[0-9a-f]+/.exec(page.url())![0]
    expect(child).not.toBe(id)
    expect(await page.textContent('[role=status]')).toContain(`Retrying 1 line of ${id}`)
    expect(await page.textContent('#parent-batch')).toBe(id)
    // The refused line fails again, and the child's page follows it there too.
    await waitForText(page, 'h1', /failed$/)
    const childLines = await (
      await gw.request(`/v1/batches/${child}/results?format=input`, key)
    ).text()
    expect(childLines).toBe(JSON.stringify(lines[5]) + '\n')
    await page.goto(`${gw.url}/dashboard/batches/${id}`)
    expect(await page.locator('.retried-by').allTextContents()).toEqual([child])

    // The list shows it by name, with its status and progress.
    await page.click('text=← All batches')
    const row = page.locator(`tr[data-batch="${id}"]`)
    expect(await row.locator('a').textContent()).toBe('nightly <triage> & co')
    expect(await row.textContent()).toContain('completed')
    expect(await row.textContent()).toContain('5 succeeded · 1 failed · 0 pending of 6')
    expect(await page.locator('img').count()).toBe(0)
  })

  test('a file with problems is shown line by line and nothing is submitted', async () => {
    await page.goto(`${gw.url}/`)
    const file = join(work, 'bad.jsonl')
    writeFileSync(
      file,
      jsonl([chatLine('ok'), chatLine('too-long', 'hi', { max_tokens: 999_999 }), '{not json']),
    )
    await page.setInputFiles('#file', file)
    await page.click('form[action="/dashboard/batches"] button[type=submit]')
    await page.waitForURL(`${gw.url}/dashboard/batches`)
    expect(await page.textContent('section.issues h2')).toBe(
      '2 problems in the file; nothing was submitted',
    )
    const rows = page.locator('section.issues tbody tr')
    expect(await rows.count()).toBe(2)
    expect(await rows.nth(0).locator('td').nth(0).textContent()).toBe('2')
    expect(await rows.nth(0).locator('td').nth(1).textContent()).toBe('too-long')
    expect(await rows.nth(1).locator('td').nth(0).textContent()).toBe('3')
    // Still only the first test's batch and its retry.
    const list = (await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }
    expect(list.data).toHaveLength(2)
  })

  test('signing out forgets the key', async () => {
    await page.goto(`${gw.url}/`)
    await page.click('text=Sign out')
    await page.waitForURL(`${gw.url}/`)
    expect(await page.locator('h1').textContent()).toBe('Sign in')
    expect(await context.cookies(gw.url)).toEqual([])
  })
})

describe('dashboard refusals', () => {
  let gw: TestGateway

  beforeAll(async () => {
    gw = await startTestGateway({ env: { MULTIGRID_DISPATCH: '0' } })
  })
  afterAll(async () => {
    await gw.stop()
  })

  const signIn = (key: string) =>
    fetch(`${gw.url}/dashboard/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ key }),
      redirect: 'manual',
    })

  /** Signs in and returns the session cookie, as a browser would send it back. */
  const sessionCookie = async (key: string) => {
    const response = await signIn(key)
    expect(response.status).toBe(303)
    return response.headers.get('set-cookie')!.split(';')[0]!
  }

  test('a bad key is refused and not kept; a good one gets an HttpOnly, SameSite=Strict cookie', async () => {
    const bad = await signIn('mg_not-a-key')
    expect(bad.status).toBe(401)
    expect(bad.headers.get('set-cookie') ?? '').not.toContain('multigrid_session=mgs_')
    expect(await bad.text()).toContain('unknown or was revoked')
    const { key } = await gw.newAccount('1')
    const good = await signIn(key)
    expect(good.status).toBe(303)
    expect(good.headers.get('location')).toBe('/')
    const cookie = good.headers.get('set-cookie')!
    // The cookie holds a session id, never the key itself.
    expect(cookie).toMatch(/^multigrid_session=mgs_[\w-]{43};/)
    expect(cookie).not.toContain(key)
    expect(cookie).toContain('HttpOnly')
    expect(cookie).toContain('SameSite=Strict')
    expect(cookie).toContain('Path=/')
  })

  test("pages carry a CSP that allows only the gateway's own script, no inline one, no outside resource", async () => {
    const response = await fetch(`${gw.url}/`)
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
    const csp = response.headers.get('content-security-policy')!
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self';")
    expect(csp).toContain("connect-src 'self';")
    expect(csp).not.toMatch(/script-src[^;]*unsafe/)
    expect(await response.text()).not.toContain('<script')
    const script = await fetch(`${gw.url}/dashboard/assets/batch-page.js`)
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
    expect(await script.text()).toContain('new EventSource(')

    // A running batch's page loads that file, and no script of its own.
    const { key } = await gw.newAccount('1')
    const created = await gw.request('/v1/batches', key, {
      method: 'POST',
      body: jsonl([chatLine('a')]),
    })
    const { id } = (await created.json()) as { id: string }
    const page = await (
      await fetch(`${gw.url}/dashboard/batches/${id}`, {
        headers: { cookie: await sessionCookie(key) },
      })
    ).text()
    expect(page.match(/<script[^>]*>/g)).toEqual([
      '<script src="/dashboard/assets/batch-page.js" defer>',
    ])
    expect(page).toContain(`data-events="/dashboard/batches/${id}/events?last_event_id=0"`)
  })

  test('the retry button: refused while the batch runs, for another account, from another site', async () => {
    const owner = await gw.newAccount('1')
    const created = await gw.request('/v1/batches', owner.key, {
      method: 'POST',
      body: jsonl([chatLine('a')]),
    })
    const { id } = (await created.json()) as { id: string }
    const post = (cookie: string, headers: Record<string, string> = {}) =>
      fetch(`${gw.url}/dashboard/batches/${id}/retry`, {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: 'idempotency_key=0123456789abcdef',
        redirect: 'manual',
      })
    const mine = await sessionCookie(owner.key)
    const running = await post(mine)
    expect(running.status).toBe(409)
    expect(await running.text()).toContain(
      'a retry takes the lines that did not succeed once it has ended',
    )
    expect((await post(await sessionCookie((await gw.newAccount('1')).key))).status).toBe(404)
    expect((await post(mine, { 'sec-fetch-site': 'cross-site' })).status).toBe(403)
    // Cancelled, the same form makes the child; posted twice (a double click), still one child.
    await gw.request(`/v1/batches/${id}`, owner.key, { method: 'DELETE' })
    const first = await post(mine)
    expect(first.status).toBe(303)
    const again = await post(mine)
    expect(again.headers.get('location')).toBe(first.headers.get('location'))
    const parent = (await (await gw.request(`/v1/batches/${id}`, owner.key)).json()) as {
      retried_by: string[]
    }
    expect(parent.retried_by).toHaveLength(1)
    expect(first.headers.get('location')).toBe(
      `/dashboard/batches/${parent.retried_by[0]}?retried=1`,
    )
  })

  test("the page's progress stream: the session's account only, from the version it names", async () => {
    const owner = await gw.newAccount('1')
    const created = await gw.request('/v1/batches', owner.key, {
      method: 'POST',
      body: jsonl([chatLine('a')]),
    })
    const { id } = (await created.json()) as { id: string }
    const cookie = { cookie: await sessionCookie(owner.key) }
    const fresh = await fetch(`${gw.url}/dashboard/batches/${id}/events`, { headers: cookie })
    expect(fresh.headers.get('content-type')).toBe('text/event-stream')
    const reader = fresh.body!.getReader()
    expect(new TextDecoder().decode((await reader.read()).value)).toStartWith(
      'id: 0\nevent: batch\n',
    )
    await reader.cancel()
    // Cancelled, it moves past version 0: a page rendered at 0 gets the ended state, once.
    await gw.request(`/v1/batches/${id}`, owner.key, { method: 'DELETE' })
    const resumed = await fetch(`${gw.url}/dashboard/batches/${id}/events?last_event_id=0`, {
      headers: cookie,
    })
    const text = await resumed.text()
    expect(text.match(/^event: batch$/gm)).toHaveLength(1)
    expect(text).toContain('"status":"cancelled"')
    const other = { cookie: await sessionCookie((await gw.newAccount('1')).key) }
    expect(
      (await fetch(`${gw.url}/dashboard/batches/${id}/events`, { headers: other })).status,
    ).toBe(404)
  })

  test('a form posted from another origin is refused', async () => {
    const { key } = await gw.newAccount('1')
    const form = new FormData()
    form.set('file', new Blob([jsonl([chatLine('a')])]), 'a.jsonl')
    const response = await fetch(`${gw.url}/dashboard/batches`, {
      method: 'POST',
      headers: {
        cookie: await sessionCookie(key),
        origin: 'http://127.0.0.1:1',
        'sec-fetch-site': 'same-site',
      },
      body: form,
    })
    expect(response.status).toBe(403)
    const list = (await (await gw.request('/v1/batches', key)).json()) as { data: unknown[] }
    expect(list.data).toHaveLength(0)
  })

  test('without the cookie, pages and downloads send the browser to sign in', async () => {
    for (const path of [
      '/dashboard/batches/batch_x',
      '/dashboard/batches/batch_x/results',
      '/dashboard/batches/batch_x/events',
    ]) {
      const response = await fetch(`${gw.url}${path}`, { redirect: 'manual' })
      expect(response.status).toBe(303)
      expect(response.headers.get('location')).toBe('/')
    }
  })

  test('the address of a form, opened in the address bar, leads back to a page, not a JSON 405', async () => {
    // A refused sign-in or upload leaves the browser at the form's address; Enter there is a GET.
    for (const [path, to] of [
      ['/dashboard/sign-in', '/'],
      ['/dashboard/sign-out', '/'],
      ['/dashboard/batches', '/'],
      ['/dashboard/batches/batch_x/cancel', '/dashboard/batches/batch_x'],
      ['/dashboard/batches/batch_x/retry', '/dashboard/batches/batch_x'],
    ]) {
      const response = await fetch(`${gw.url}${path}`, { redirect: 'manual' })
      expect([path, response.status, response.headers.get('location')]).toEqual([path, 303, to])
    }
  })

  test("another account's batch is not found; a revoked key is signed out", async () => {
    const owner = await gw.newAccount('1')
    const created = await gw.request('/v1/batches', owner.key, {
      method: 'POST',
      body: jsonl([chatLine('a')]),
    })
    const { id } = (await created.json()) as { id: string }
    const other = await gw.newAccount('1')
    const cookie = { cookie: await sessionCookie(other.key) }
    expect((await fetch(`${gw.url}/dashboard/batches/${id}`, { headers: cookie })).status).toBe(404)
    expect(
      (await fetch(`${gw.url}/dashboard/batches/${id}/results`, { headers: cookie })).status,
    ).toBe(404)
    expect((await gw.admin(`/keys/${other.keyId}`, { method: 'DELETE' })).status).toBe(200)
    const revoked = await fetch(`${gw.url}/`, { headers: cookie })
    expect(revoked.status).toBe(401)
    expect(revoked.headers.get('set-cookie')).toContain('Max-Age=0')
  })

  test('a read-only key sees its batches but gets no upload form and cannot submit', async () => {
    const { key } = await gw.newAccount('1', { scopes: ['read'] })
    const session = await sessionCookie(key)
    const page = await fetch(`${gw.url}/`, { headers: { cookie: session } })
    expect(page.status).toBe(200)
    const text = await page.text()
    expect(text).not.toContain('action="/dashboard/batches"')
    expect(text).toContain('lacks the "batches" scope')
    const form = new FormData()
    form.set('file', new Blob([jsonl([chatLine('a')])]), 'a.jsonl')
    const submit = await fetch(`${gw.url}/dashboard/batches`, {
      method: 'POST',
      headers: { cookie: session },
      body: form,
    })
    expect(submit.status).toBe(403)
  })
})

describe('dashboard: why a batch waits', () => {
  let sim: Simulator
  let gw: TestGateway

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 1_500 })
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1` },
      env: { MULTIGRID_POLL_MS: '50' },
    })
  })
  afterAll(async () => {
    await gw.stop()
    await sim.stop()
  })

  /** Polls the API until the batch satisfies `wanted`, bounded in time. */
  const waitForBatch = async (key: string, id: string, wanted: (b: Batch) => boolean) => {
    const deadline = Date.now() + 20_000
    for (;;) {
      const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
      if (wanted(batch)) return batch
      if (Date.now() > deadline) throw new Error(`batch ${id} never got there: ${batch.status}`)
      await Bun.sleep(50)
    }
  }
  const sessionCookie = async (key: string) => {
    const response = await fetch(`${gw.url}/dashboard/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ key }),
      redirect: 'manual',
    })
    expect(response.status).toBe(303)
    return response.headers.get('set-cookie')!.split(';')[0]!
  }

  test('the upload form takes a spend cap, refused in the API words when it is bad', async () => {
    const { key } = await gw.newAccount('5')
    const cookie = await sessionCookie(key)
    const post = (cap: string) => {
      const form = new FormData()
      form.set('file', new Blob([jsonl([chatLine('f-1'), chatLine('f-2')])]), 'capped.jsonl')
      form.set('max_cost_usd', cap)
      return fetch(`${gw.url}/dashboard/batches`, {
        method: 'POST',
        headers: { cookie, origin: gw.url },
        body: form,
        redirect: 'manual',
      })
    }
    const bad = await post('lots')
    expect(bad.status).toBe(400)
    expect(await bad.text()).toContain(
      'max_cost_usd must be a decimal amount of USD greater than 0',
    )
    const made = await post('0.000001')
    expect(made.status).toBe(303)
    const id = /batch_[0-9a-f]+/.exec(made.headers.get('location')!)![0]
    const page = await (
      await fetch(`${gw.url}/dashboard/batches/${id}?submitted=1`, { headers: { cookie } })
    ).text()
    expect(page).toContain('$0.000001 held as the spend cap (max_cost_usd; the cost ceiling is $')
    expect(page).toContain('capped at $0.000001 (max_cost_usd)')
    const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch & {
      max_cost_usd: string
    }
    expect(batch.max_cost_usd).toBe('0.000001')
  })

  test('a 72-hour upload the credit does not cover waits for a top-up, as the API does by default', async () => {
    const { key } = await gw.newAccount('0')
    const cookie = await sessionCookie(key)
    const form = new FormData()
    form.set('file', new Blob([jsonl([chatLine('t-1')])]), 'later.jsonl')
    form.set('completion_window_hours', '72')
    const made = await fetch(`${gw.url}/dashboard/batches`, {
      method: 'POST',
      headers: { cookie, origin: gw.url },
      body: form,
      redirect: 'manual',
    })
    expect(made.status).toBe(303)
    const id = /batch_[0-9a-f]+/.exec(made.headers.get('location')!)![0]
    const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
    expect(batch).toMatchObject({ status: 'validating', waiting: { code: 'insufficient_credit' } })
  })

  test('the upload form posted twice is one batch; its key sent again with another file says to reload the page', async () => {
    const { key } = await gw.newAccount('1')
    const cookie = await sessionCookie(key)
    const post = (lines: unknown[]) => {
      const form = new FormData()
      form.set('file', new Blob([jsonl(lines)]), 'twice.jsonl')
      form.set('idempotency_key', 'fedcba9876543210')
      return fetch(`${gw.url}/dashboard/batches`, {
        method: 'POST',
        headers: { cookie, origin: gw.url },
        body: form,
        redirect: 'manual',
      })
    }
    const first = await post([chatLine('a')])
    expect(first.status).toBe(303)
    const again = await post([chatLine('a')])
    expect(again.status).toBe(303)
    expect(again.headers.get('location')).toBe(first.headers.get('location'))
    const id = /batch_[0-9a-f]+/.exec(first.headers.get('location')!)![0]
    const other = await post([chatLine('b')])
    expect(other.status).toBe(422)
    expect(await other.text()).toContain(
      `this form already submitted another file, which made batch ${id}; reload the page to submit this one`,
    )
    const list = (await (await gw.request('/v1/batches', key)).json()) as { data: unknown[] }
    expect(list.data).toHaveLength(1)
  })

  test('a batch that waits shows why on its page, with what to do', async () => {
    const { key } = await gw.newAccount('5')
    const lines = Array.from({ length: 4 }, (_, i) => chatLine(`w-${i}`, `waiting line ${i}`))
    const post = (query: string) =>
      gw.request(`/v1/batches${query}`, key, {
        method: 'POST',
        body: jsonl(lines),
        headers: { 'content-type': 'application/jsonl' },
      })
    const quote = (await (await post('?dry_run=true')).json()) as Batch
    // Room for one line and a half: one runs (1.5 s upstream), the rest wait for it.
    const cap = (Number(quote.cost_ceiling_usd) / lines.length) * 1.5
    const created = (await (await post(`?max_cost_usd=${cap.toFixed(6)}`)).json()) as Batch
    await waitForBatch(key, created.id, (b) => b.waiting?.code === 'max_cost_reached')
    const cookie = await sessionCookie(key)
    const page = await (
      await fetch(`${gw.url}/dashboard/batches/${created.id}`, { headers: { cookie } })
    ).text()
    expect(page).toContain('<div class="notice" id="waiting" role="status">')
    expect(page).toContain('<span class="mono">max_cost_reached</span>')
    expect(page).toContain('submit them again with a higher max_cost_usd')
    expect(page).toContain(
      '<p id="eta"><span class="dim small">ETA</span> <b>not known yet</b></p>',
    )
    // Once it has ended, its cost bar is drawn against the cap, what the batch could spend, not
    // its higher ceiling.
    const ended = await waitForBatch(key, created.id, (b) => b.status === 'completed')
    const { cost_usd } = ended as Batch & { cost_usd: string }
    expect(Number(cost_usd)).toBeGreaterThan(0)
    const width = Decimal.min(100, new Decimal(cost_usd).dividedBy(cap.toFixed(6)).times(100))
    const endPage = await (
      await fetch(`${gw.url}/dashboard/batches/${created.id}`, { headers: { cookie } })
    ).text()
    expect(endPage).toContain(`<span class="cost" style="width:${width.toFixed(2)}%"></span>`)
  })

  test('a batch that could not run shows why: its errors on its page', async () => {
    const { key } = await gw.newAccount('5')
    // A facade file with a problem makes a failed batch whose errors say what.
    const bad = jsonl([chatLine('ok'), chatLine('big', 'x', { max_tokens: 999_999 })])
    const made = await createFacadeBatch(gw, key, bad)
    expect(made.status).toBe('failed')
    const cookie = await sessionCookie(key)
    const page = await (
      await fetch(`${gw.url}/dashboard/batches/${made.id}`, { headers: { cookie } })
    ).text()
    expect(page).toContain('<h2>Why it did not run</h2>')
    expect(page).toMatch(/line 2: body\.max_tokens must be at most 4096/)
    // Past 25 problems: the 25 listed, then how many more there are, as the facade says it.
    const many = jsonl(Array.from({ length: 30 }, (_, i) => chatLine(`b-${i}`, 'x', { n: 12 })))
    const failed = await createFacadeBatch(gw, key, many)
    const manyPage = await (
      await fetch(`${gw.url}/dashboard/batches/${failed.id}`, { headers: { cookie } })
    ).text()
    const section = /<section id="errors">[\s\S]*?<\/section>/.exec(manyPage)![0]
    expect(section.match(/<li>/g)?.length).toBe(25)
    expect(section).toContain('5 more problems are not listed')
    expect(section).not.toContain('…and 1 more')
  })
})
