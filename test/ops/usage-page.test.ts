/**
 * The dashboard's usage page in headless Chromium (as test/ops/dashboard.test.ts drives it): its
 * figures are the account's charges and the answers' tokens, its charts are inline SVG with no
 * script, and it says what routing saved against the first listed offerings.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { usd } from '../../src/money/decimal.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { runSomeUsage, usageCatalog } from '../helpers/usage-run.ts'

const CHROMIUM = '/usr/bin/chromium'
const OUT = join(import.meta.dir, '../out')

let sim: Simulator
let gw: TestGateway
let context: BrowserContext
let page: Page
let work = ''

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`Chromium is not installed at ${CHROMIUM}: "apt-get install -y chromium"`)
  sim = await startSimulator({ latencyMs: 5 })
  gw = await startTestGateway({ catalog: usageCatalog(sim.url), env: { MULTIGRID_POLL_MS: '50' } })
  work = mkdtempSync(join(tmpdir(), 'mg-usage-page-'))
  context = await chromium.launchPersistentContext(join(work, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-sync'],
  })
  page = context.pages()[0] ?? (await context.newPage())
})
afterAll(async () => {
  await context?.close()
  await gw?.stop()
  await sim?.stop()
  if (work) rmSync(work, { recursive: true, force: true })
})

test('the usage page shows the charges, the tokens and the saving, as SVG charts without script', async () => {
  const ran = await runSomeUsage(gw)
  await page.goto(`${gw.url}/`)
  await page.fill('#key', ran.key)
  await page.click('button[type=submit]')
  await page.waitForURL(`${gw.url}/`)
  await page.click('a[href="/dashboard/usage"]')
  await page.waitForURL(`${gw.url}/dashboard/usage`)
  expect(await page.locator('h1').textContent()).toBe('Usage')

  expect(await page.textContent('#usage-total-cost')).toBe(`$${usd(ran.charged)}`)
  expect(await page.textContent('#usage-total-lines')).toBe('8')
  expect(await page.textContent('#usage-total-live')).toBe('2')
  expect(await page.textContent('#usage-total-tokens')).toBe(
    (ran.input + ran.output).toLocaleString('en-US'),
  )
  expect(await page.textContent('#usage-saved')).toBe(`$${usd(ran.saved)}`)
  expect(ran.saved.greaterThan(0)).toBe(true)

  // The per-model table adds up to the charges; the charts are there as SVG, one bar a model.
  const costs = await page.locator('table[data-grouping="model"] td.cost').allTextContents()
  expect(costs).toHaveLength(2)
  const total = costs.reduce((t, c) => t.plus(c.slice(1)), new Decimal(0))
  expect(total.equals(ran.charged)).toBe(true)
  expect(await page.locator('svg[aria-label="Spend per model"] rect').count()).toBe(2)
  expect(await page.locator('svg[aria-label="Spend per day (USD)"] rect').count()).toBe(30)
  expect(await page.textContent('svg[aria-label="Spend per provider"]')).toContain('sim')
  expect(await page.locator('script').count()).toBe(0)
  mkdirSync(OUT, { recursive: true })
  await page.screenshot({ path: join(OUT, 'usage-page.png'), fullPage: true })

  // A range over 400 days is refused on the page, in words.
  const wide = await page.goto(`${gw.url}/dashboard/usage?from=2020-01-01&to=2026-01-01`)
  expect(wide!.status()).toBe(400)
  expect(await page.textContent('main')).toContain('at most 400 days')
})
