/**
 * Plan: the spill planner of docs/routing.md on a 20,000-line batch, a free GPU pool of fixed capacity
 * and a paid provider, in windows where the pool alone would need 0.5×, 1×, 2× and 4× the window.
 * For each: the share of lines on the pool, the cost, the lower bound (the paid price of the lines
 * the pool's capacity cannot fit in the window: no schedule that finishes in time costs less),
 * their ratio, the ratio to the same bound for the window minus the safety margin (the horizon
 * docs/routing.md has the planner fill the pool up to), and whether the batch finished inside its
 * window. A fifth window, 0.9×, is the one the pool alone fits with the margin kept.
 *
 * The windows are hours long, so they run in simulated time: the dispatcher's own decision code
 * (the claim allocator, the spill planner and its throughput meter, src/dispatch/) driven by a
 * discrete-event model of the two providers (a FIFO gate of `max_concurrency` slots, a service
 * time with jitter). One small scenario also runs end to end in real time: a gateway process,
 * a simulator in GPU-pool mode as the free pool and a plain simulator as the paid provider, the
 * window shortened after admission in the gateway's SQLite file (windows are whole hours).
 *
 *   bun bench/plan.ts [--lines 20000] [--margin 0.1] [--seed 1] [--live-lines 600] [--no-live]
 */
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { createClaimAllocator } from '../src/dispatch/claim-allocator.ts'
import { HOLD_MS } from '../src/dispatch/run-line.ts'
import { createSpillPlanner } from '../src/dispatch/spill-planner.ts'
import { priceUsage } from '../src/pricing/price-usage.ts'
import { Money } from '../src/money/decimal.ts'
import { createRandom } from '../src/simulator/prng.ts'
import { startSimulator } from '../src/simulator/server.ts'
import type { RunnableBatch } from '../src/store/store.ts'
import { writeCatalog } from '../test/helpers/catalog.ts'
import { newKey, randomPort, spawnGateway } from './lib.ts'

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '20000' },
    margin: { type: 'string', default: '0.1' },
    seed: { type: 'string', default: '1' },
    'live-lines': { type: 'string', default: '600' },
    'no-live': { type: 'boolean', default: false },
  },
})
const LINES = Number(values.lines)
const MARGIN = Number(values.margin)

/** The paid offering's list price and one line's usage: what a line sent there costs. */
const PAID_OFFERING = {
  provider: 'paid',
  upstream_model: 'sim-chat',
  input_usd_per_mtok: '0.15',
  output_usd_per_mtok: '0.60',
}
const POOL_OFFERING = {
  ...PAID_OFFERING,
  provider: 'pool',
  input_usd_per_mtok: '0',
  output_usd_per_mtok: '0',
}
const LINE_USAGE = { input_tokens: 40, output_tokens: 60 }
const PAID_PER_LINE = new Money(priceUsage(LINE_USAGE, PAID_OFFERING))

interface ProviderModel {
  name: string
  limit: number
  latencyMs: number
  /** Each service time is latency × (1 ± jitter/2). */
  jitter: number
  /** The share of calls refused busy at once (flex: 429 resource_unavailable). */
  refuseRate?: number
}

/** The free pool: 5 slots at 3.6 s a line, 1.39 lines/s: 20,000 lines take it 4 hours. */
const POOL: ProviderModel = { name: 'pool', limit: 5, latencyMs: 3_600, jitter: 0.1 }
const PAID: ProviderModel = { name: 'paid', limit: 64, latencyMs: 2_000, jitter: 0.2 }

interface Outcome {
  onPool: number
  paid: number
  finishedMs: number
  deadlineMs: number
}

/** Min-heap of timed events. */
class Events<T> {
  private items: { at: number; value: T }[] = []
  push(at: number, value: T) {
    const items = this.items
    items.push({ at, value })
    let i = items.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (items[parent].at <= items[i].at) break
      ;[items[parent], items[i]] = [items[i], items[parent]]
      i = parent
    }
  }
  pop(): { at: number; value: T } | undefined {
    const items = this.items
    if (items.length === 0) return undefined
    const top = items[0]
    const last = items.pop()!
    if (items.length > 0) {
      items[0] = last
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < items.length && items[l].at < items[m].at) m = l
        if (r < items.length && items[r].at < items[m].at) m = r
        if (m === i) break
        ;[items[m], items[i]] = [items[i], items[m]]
        i = m
      }
    }
    return top
  }
}

/**
 * One batch of `lines` through the dispatcher's decisions in simulated time: claims as the claim
 * allocator makes them, each line's offering chosen by the spill planner when it is launched, the
 * providers' slots and service times modelled, their completions fed back to the planner.
 */
function simulate(
  lines: number,
  windowMs: number,
  seed: number,
  providers: [ProviderModel, ProviderModel] = [POOL, PAID],
): Outcome {
  const random = createRandom(seed)
  const names = providers.map((p) => p.name)
  const claims = createClaimAllocator({ capacity: providers[0].limit + providers[1].limit })
  const planner = createSpillPlanner({
    marginShare: MARGIN,
    available: () => true,
    unreachable: () => false,
    limit: (name) => providers.find((p) => p.name === name)!.limit,
  })
  const batch: RunnableBatch = {
    id: 'batch_sim',
    accountId: 'acct_sim',
    createdAt: 0,
    deadlineAt: windowMs / 1000,
    endpoint: '/v1/chat/completions',
    pending: lines,
    laneLines: false,
    running: 0,
  }
  const state = new Map(
    providers.map((p) => [
      p.name,
      { model: p, running: 0, queue: [] as { startedAt?: number; round: number }[] },
    ]),
  )
  type Event =
    | { kind: 'done'; provider: string; startedAt: number }
    | { kind: 'retry' }
    | { kind: 'refused'; provider: string; startedAt: number; round: number }
    | { kind: 'resend'; provider: string; startedAt: number; round: number }
  const events = new Events<Event>()
  const done = new Map(names.map((n) => [n, 0]))
  let now = 0
  let inFlight = 0
  let held = 0
  let finished = 0
  let finishedMs = 0

  const serve = (name: string) => {
    const s = state.get(name)!
    while (s.running < s.model.limit && s.queue.length > 0) {
      // A resent call keeps its first start: the waits on a busy lane are part of its rate.
      const resent = s.queue.shift()!
      s.running++
      const startedAt = resent.startedAt ?? now
      if (resent.startedAt === undefined) planner.started(batch.id, name, now)
      // Flex out of capacity (docs/pricing.md): refused at once, resent after a backoff, no attempt.
      if (random() < (s.model.refuseRate ?? 0)) {
        const round = resent.round
        events.push(now + 5, { kind: 'refused', provider: name, startedAt, round })
        continue
      }
      const service = s.model.latencyMs * (1 + s.model.jitter * (random() - 0.5))
      events.push(now + service, { kind: 'done', provider: name, startedAt })
    }
  }
  const claim = () => {
    for (const { count } of claims.allocate({
      now,
      batches: [batch],
      inFlight,
      heldBack: new Set(),
      // As the dispatcher bounds it: no further ahead than the next line's offering takes.
      room: (b) => planner.room(b, b.pending, now),
    })) {
      batch.pending -= count
      for (let i = 0; i < count; i++) {
        const choice = planner.choose(batch, names, batch.pending + count - i, now)
        if (choice.kind === 'hold') {
          // Handed back unsent, claimable again after HOLD_MS (as run-line.ts does).
          held++
          events.push(now + HOLD_MS, { kind: 'retry' })
          continue
        }
        inFlight++
        const name = names[choice.index]
        planner.enter(batch.id, name)
        state.get(name)!.queue.push({ round: 0 })
        serve(name)
      }
    }
  }

  claim()
  for (let event = events.pop(); event; event = events.pop()) {
    now = event.at
    if (event.value.kind === 'retry') {
      batch.pending++
      held--
    } else if (event.value.kind === 'refused') {
      // The slot is free while the call backs off (upstreams.ts waitWhileBusy: 50 ms doubling).
      const { provider, startedAt, round } = event.value
      state.get(provider)!.running--
      const backoff = Math.min(2_000, 50 * 2 ** Math.min(round, 6)) * (0.5 + random() / 2)
      events.push(now + backoff, { kind: 'resend', provider, startedAt, round: round + 1 })
      serve(provider)
    } else if (event.value.kind === 'resend') {
      const { provider, startedAt, round } = event.value
      state.get(provider)!.queue.push({ startedAt, round })
      serve(provider)
    } else {
      const { provider, startedAt } = event.value
      const s = state.get(provider)!
      s.running--
      inFlight--
      planner.ended(batch.id, provider, { nowMs: now, serviceMs: now - startedAt, ok: true })
      planner.leave(batch.id, provider)
      done.set(provider, done.get(provider)! + 1)
      finished++
      finishedMs = now
      serve(provider)
    }
    if (batch.pending > 0) claim()
    if (finished === lines) break
  }
  if (held !== 0 || finished !== lines) throw new Error('the simulation lost lines')
  return {
    onPool: done.get(names[0])!,
    paid: done.get(names[1])!,
    finishedMs,
    deadlineMs: windowMs,
  }
}

const poolRate = (POOL.limit * 1000) / POOL.latencyMs
const poolAloneMs = (LINES / poolRate) * 1000

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
const usdText = (m: Money) => `$${m.toFixed(m.lessThan(0.01) && !m.isZero() ? 6 : 4)}`

/** The lines the pool's capacity cannot fit in `ms`: their paid price is what no schedule beats. */
const unfit = (lines: number, ratePerSecond: number, ms: number) =>
  lines - Math.min(lines, Math.floor((ratePerSecond * ms) / 1000))

function ratioText(cost: Money, bound: Money): string {
  if (!bound.isZero()) return cost.div(bound).toFixed(3)
  return cost.isZero() ? '1.00' : '∞ (bound $0)'
}

function row(
  label: string,
  windowMs: number,
  outcome: Outcome,
  bounds: { window: number; margin: number },
  perLine = PAID_PER_LINE,
) {
  const cost = perLine.times(outcome.paid)
  const bound = perLine.times(bounds.window)
  const marginBound = perLine.times(bounds.margin)
  const time = (ms: number) =>
    windowMs < 3_600_000 ? `${fmt(ms / 1000, 1)} s` : `${fmt(ms / 3_600_000, 2)} h`
  const inWindow = outcome.finishedMs <= outcome.deadlineMs
  console.log(
    `  ${label.padEnd(22)} ${time(windowMs).padStart(8)} ${`${fmt((100 * outcome.onPool) / (outcome.onPool + outcome.paid), 1)}%`.padStart(8)} ${usdText(cost).padStart(10)} ${usdText(bound).padStart(10)} ${ratioText(cost, bound).padStart(13)} ${ratioText(cost, marginBound).padStart(14)} ${(inWindow ? 'yes' : 'NO').padStart(5)} ${time(outcome.finishedMs).padStart(9)}`,
  )
}

console.log(
  `plan: ${fmt(LINES)} lines; free pool ${POOL.limit} slots × ${POOL.latencyMs / 1000} s (${fmt(poolRate, 2)} lines/s, alone ${fmt(poolAloneMs / 3_600_000, 2)} h); paid ${PAID.limit} slots × ${PAID.latencyMs / 1000} s at ${usdText(PAID_PER_LINE.times(1000))} per 1,000 lines; margin ${MARGIN * 100}% of the window`,
)
console.log(
  `  ${'pool alone needs'.padEnd(22)} ${'window'.padStart(8)} ${'on pool'.padStart(8)} ${'cost'.padStart(10)} ${'bound'.padStart(10)} ${'cost ÷ bound'.padStart(13)} ${'÷ margin bound'.padStart(14)} ${'in'.padStart(5)} ${'finished'.padStart(9)}`,
)
// 0.9×: the pool alone fits the window minus the margin exactly, the planner's own horizon.
for (const factor of [0.5, 1 - MARGIN, 1, 2, 4]) {
  const windowMs = poolAloneMs / factor
  const outcome = simulate(LINES, windowMs, Number(values.seed))
  row(
    `${fmt(factor, factor === 1 - MARGIN ? 2 : 1).replace(/\.0$/, '')}× the window`,
    windowMs,
    outcome,
    {
      window: unfit(LINES, poolRate, windowMs),
      margin: unfit(LINES, poolRate, (1 - MARGIN) * windowMs),
    },
  )
}
console.log(
  '  (simulated time; bound = paid price × the lines the pool cannot fit in the whole window, what no',
)
console.log(
  `   schedule that finishes in time beats; margin bound = the same for the window minus the ${MARGIN * 100}% margin,`,
)
console.log(
  '   where docs/routing.md has the planner fill the pool up to: the margin alone costs the difference)',
)

/**
 * The flex lane (docs/pricing.md): OpenAI's flex tier at half the live price, slower (6 s a line against
 * 2 s) and refusing a fifth of its calls at once (429 resource_unavailable: busy, resent after a
 * backoff, never an attempt), planned as one more offering beside the live lane. A window twice
 * what flex alone needs: the cost is compared with everything on flex (aim ≤ 1.02×). Half of it:
 * with the cheapest split that finishes in time, the lines flex's capacity fits at flex prices and
 * the rest on the live lane (aim ≤ 1.10×; against the window minus the margin too).
 */
function flexScenario() {
  const LIVE_OFFERING = {
    ...PAID_OFFERING,
    provider: 'openai',
    input_usd_per_mtok: '1.25',
    output_usd_per_mtok: '10',
  }
  const FLEX_OFFERING = {
    ...LIVE_OFFERING,
    provider: 'openai:flex',
    input_usd_per_mtok: '0.625',
    output_usd_per_mtok: '5',
  }
  const livePerLine = new Money(priceUsage(LINE_USAGE, LIVE_OFFERING))
  const flexPerLine = new Money(priceUsage(LINE_USAGE, FLEX_OFFERING))
  const FLEX: ProviderModel = {
    name: 'openai:flex',
    limit: 32,
    latencyMs: 6_000,
    jitter: 0.3,
    refuseRate: 0.2,
  }
  const LIVE: ProviderModel = { name: 'openai', limit: 64, latencyMs: 2_000, jitter: 0.2 }
  const flexRate = (FLEX.limit * 1000) / FLEX.latencyMs
  const flexAloneMs = (LINES / flexRate) * 1000
  console.log(
    `flex lane: ${fmt(LINES)} lines; flex ${FLEX.limit} slots × ${FLEX.latencyMs / 1000} s, ${FLEX.refuseRate! * 100}% refused resource_unavailable (alone ≥ ${fmt(flexAloneMs / 3_600_000, 2)} h) at ${usdText(flexPerLine.times(1000))} per 1,000 lines; live ${LIVE.limit} slots × ${LIVE.latencyMs / 1000} s at ${usdText(livePerLine.times(1000))}`,
  )
  for (const factor of [0.5, 2]) {
    const windowMs = flexAloneMs / factor
    const outcome = simulate(LINES, windowMs, Number(values.seed), [FLEX, LIVE])
    const cost = flexPerLine.times(outcome.onPool).plus(livePerLine.times(outcome.paid))
    const split = (ms: number) => {
      const fits = LINES - unfit(LINES, flexRate, ms)
      return flexPerLine.times(fits).plus(livePerLine.times(LINES - fits))
    }
    const allFlex = flexPerLine.times(LINES)
    const inWindow = outcome.finishedMs <= outcome.deadlineMs
    const versus =
      factor < 1
        ? `÷ all-flex ${cost.div(allFlex).toFixed(3)} (aim ≤ 1.02)`
        : `÷ cheapest in-time split ${cost.div(split(windowMs)).toFixed(3)} (aim ≤ 1.10), ÷ same for the window minus the margin ${cost.div(split((1 - MARGIN) * windowMs)).toFixed(3)}`
    console.log(
      `  flex alone needs ${fmt(factor, 1)}× the window (${fmt(windowMs / 3_600_000, 2)} h): ${fmt((100 * outcome.onPool) / LINES, 1)}% on flex, cost ${usdText(cost)}, ${versus}, in window ${inWindow ? 'yes' : 'NO'} (${fmt(outcome.finishedMs / 3_600_000, 2)} h)`,
    )
  }
}
flexScenario()

/**
 * End to end in real time: `lines` lines through a gateway process, the free pool a simulator
 * in GPU-pool mode (4 slots × 200 ms: 20 lines/s) and the paid provider a plain simulator listed
 * before it in the catalog; the window is shortened after admission to half of what the pool
 * alone would need (2×).
 */
async function live(lines: number) {
  const poolSlots = 4
  const latencyMs = 200
  const pool = await startSimulator({ gpuCapacity: poolSlots, latencyMs })
  const paid = await startSimulator({ latencyMs })
  const provider = (url: string, concurrency: number) => ({
    kind: 'openai',
    base_url: `${url}/v1`,
    max_concurrency: concurrency,
    timeout_s: 30,
  })
  const catalog = writeCatalog({
    providers: { paid: provider(paid.url, 32), pool: provider(pool.url, poolSlots) },
    models: [
      {
        id: 'bench/chat',
        endpoints: ['chat'],
        context_tokens: 128000,
        max_output_tokens: 4096,
        offerings: [PAID_OFFERING, POOL_OFFERING],
      },
    ],
  })
  const gateway = await spawnGateway(
    { MULTIGRID_CONFIG: catalog, MULTIGRID_POLL_MS: '20', MULTIGRID_SPILL_MARGIN: String(MARGIN) },
    randomPort(21_000),
  )
  try {
    const key = await newKey(gateway.url)
    const file = Array.from({ length: lines }, (_, i) =>
      JSON.stringify({
        custom_id: `l${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: {
          model: 'bench/chat',
          messages: [{ role: 'user', content: `question ${i}` }],
          max_tokens: 16,
        },
      }),
    ).join('\n')
    const headers = { authorization: `Bearer ${key}` }
    const created = (await (
      await fetch(`${gateway.url}/v1/batches?completion_window_hours=1`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/jsonl' },
        body: file,
      })
    ).json()) as { id: string; created_at: number }
    const poolAloneS = lines / ((poolSlots * 1000) / latencyMs)
    const windowS = Math.round(poolAloneS / 2)
    // Windows are whole hours; the gateway reads the deadline from its store on every claim.
    const db = new Database(join(gateway.env.MULTIGRID_DATA_DIR, 'multigrid.sqlite'))
    db.exec('PRAGMA busy_timeout = 5000')
    db.query('UPDATE batches SET deadline_at = created_at + ? WHERE id = ?').run(
      windowS,
      created.id,
    )
    db.close()
    let batch: { status: string; finished_at: number | null; deadline_at: number; cost_usd: string }
    const until = Date.now() + (windowS + 30) * 1000
    for (;;) {
      batch = (await (
        await fetch(`${gateway.url}/v1/batches/${created.id}`, { headers })
      ).json()) as typeof batch
      if (batch.finished_at !== null || Date.now() > until) break
      await Bun.sleep(200)
    }
    const rows = (
      await (await fetch(`${gateway.url}/v1/batches/${created.id}/results`, { headers })).text()
    )
      .trim()
      .split('\n')
      .map(
        (line) => JSON.parse(line) as { status: string; provider: string | null; cost_usd: string },
      )
    const paidRows = rows.filter((r) => r.provider === 'paid')
    const onPool = rows.filter((r) => r.provider === 'pool').length
    const perLine = paidRows.length > 0 ? new Money(paidRows[0].cost_usd) : PAID_PER_LINE
    const fits = Math.min(lines, Math.floor(((poolSlots * 1000) / latencyMs) * windowS))
    console.log(
      `end to end, real time: ${lines} lines, pool ${poolSlots} slots × ${latencyMs} ms (alone ${poolAloneS} s), window shortened to ${windowS} s (2×), paid listed first:`,
    )
    row(
      '2× (live, gateway)',
      windowS * 1000,
      {
        onPool,
        paid: paidRows.length,
        finishedMs: ((batch.finished_at ?? Infinity) - created.created_at) * 1000,
        deadlineMs: (batch.deadline_at - created.created_at) * 1000,
      },
      {
        window: lines - fits,
        margin: unfit(lines, (poolSlots * 1000) / latencyMs, (1 - MARGIN) * windowS * 1000),
      },
      perLine,
    )
    const succeeded = rows.filter((r) => r.status === 'succeeded').length
    console.log(
      `  ${succeeded} of ${lines} succeeded, status ${batch.status}, cost_usd ${batch.cost_usd} (${perLine.toFixed()} a paid line)`,
    )
  } finally {
    await gateway.stop()
    await pool.stop()
    await paid.stop()
  }
}

if (!values['no-live']) await live(Number(values['live-lines']))
