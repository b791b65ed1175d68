/**
 * The dashboard's usage page (docs/operations.md): spend and tokens per day, per model and per provider as
 * charts, a table of the same figures, and what the planner's routing saved against running
 * every line on its model's first listed offering. The figures are GET /v1/usage's.
 */
import type { AccountView } from '../../store/store.ts'
import type { UsageRow } from '../../store/store.ts'
import { usd } from '../../money/decimal.ts'
import { html, type Html } from './html.ts'
import { layout } from './layout.ts'
import { dailyColumns, horizontalBars, type Bar } from './svg-charts.ts'
import { groupUsage, routingSaving, type Grouping, type UsageQuery } from '../usage-report.ts'

const count = (n: number) => n.toLocaleString('en-US')

type Groups = ReturnType<typeof groupUsage>

const spendBars = (groups: Groups): Bar[] =>
  groups.map(({ key, sum }) => ({
    label: key,
    value: sum.cost.toNumber(),
    text: `$${usd(sum.cost)}`,
  }))

const tokenBars = (groups: Groups): Bar[] =>
  groups.map(({ key, sum }) => ({
    label: key,
    value: sum.input + sum.output,
    text: `${count(sum.input + sum.output)} tokens`,
  }))

function figuresTable(name: string, groups: Groups): Html {
  return html`<table class="usage" data-grouping="${name}">
    <thead>
      <tr>
        <th>${name}</th>
        <th>lines</th>
        <th>live calls</th>
        <th>input tokens</th>
        <th>output tokens</th>
        <th>cost</th>
      </tr>
    </thead>
    <tbody>
      ${groups.map(
        ({ key, sum }) =>
          html`<tr>
            <td>${key}</td>
            <td>${count(sum.lines)}</td>
            <td>${count(sum.liveCalls)}</td>
            <td>${count(sum.input)}</td>
            <td>${count(sum.output)}</td>
            <td class="cost">$${usd(sum.cost)}</td>
          </tr>`,
      )}
    </tbody>
  </table>`
}

export function usagePage(account: AccountView, rows: readonly UsageRow[], query: UsageQuery) {
  const by = (groupBy: Grouping) => groupUsage(rows, { ...query, groupBy })
  const days = by('day')
  const models = by('model')
  const providers = by('provider')
  const saving = routingSaving(rows)
  const totals = by('model').reduce(
    (t, { sum }) => ({
      lines: t.lines + sum.lines,
      live: t.live + sum.liveCalls,
      tokens: t.tokens + sum.input + sum.output,
    }),
    { lines: 0, live: 0, tokens: 0 },
  )
  return layout(
    { title: 'Usage', account: account.name },
    html`<section>
        <h1>Usage</h1>
        <form method="get" action="/dashboard/usage" class="inline">
          <label>from <input type="date" name="from" value="${query.from}" required /></label>
          <label>to <input type="date" name="to" value="${query.to}" required /></label>
          <button type="submit">Show</button>
          <span class="dim small">UTC dates, both included; at most 400 days.</span>
        </form>
        <p id="usage-totals">
          Spent <strong id="usage-total-cost">$${usd(saving.costUsd)}</strong> on
          <span id="usage-total-lines">${count(totals.lines)}</span> batch lines and
          <span id="usage-total-live">${count(totals.live)}</span> live calls,
          <span id="usage-total-tokens">${count(totals.tokens)}</span> tokens.
        </p>
        <p id="usage-saving">
          Routing saved <strong id="usage-saved">$${usd(saving.savedUsd)}</strong> against running
          every line on its model's first listed offering ($${usd(saving.firstOfferingCostUsd)}).
        </p>
      </section>
      <section>
        <h2>Per day</h2>
        ${dailyColumns('Spend per day (USD)', spendBars(days))}
        ${dailyColumns('Tokens per day', tokenBars(days))}
      </section>
      <section>
        <h2>Per model</h2>
        ${horizontalBars('Spend per model', spendBars(models))}
        ${horizontalBars('Tokens per model', tokenBars(models))} ${figuresTable('model', models)}
      </section>
      <section>
        <h2>Per provider</h2>
        ${horizontalBars('Spend per provider', spendBars(providers))}
        ${horizontalBars('Tokens per provider', tokenBars(providers))}
        ${figuresTable('provider', providers)}
      </section>`,
  )
}
