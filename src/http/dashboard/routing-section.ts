/**
 * The batch page's routing section (docs/routing.md): where the lines went, per provider, as one bar
 * and a table; the projected finish; and why the batch waits, with what to do about it.
 */
import { currentWaiting, nowSeconds, type BatchRecord, type ProviderShare } from '../../domain.ts'
import { usd } from '../../money/decimal.ts'
import { batchEta } from '../render-native.ts'
import { html, type Html } from './html.ts'
import { utc } from './widgets.ts'

/** Colours of the providers' segments (layout.ts: .bar .p0 … .p5), in name order. */
const COLOURS = 6

/** Lines each provider took (ended there or running there now), as one bar over the batch's lines. */
export function providerBar(total: number, shares: Record<string, ProviderShare>): Html {
  const entries = Object.entries(shares)
  const width = (n: number) => (total > 0 ? Math.min(100, (n / total) * 100).toFixed(2) : '0')
  const label = entries
    .map(([name, s]) => `${name}: ${s.succeeded + s.failed + s.running}`)
    .join(' · ')
  return html`<div
    class="bar big"
    id="provider-bar"
    role="img"
    aria-label="${label}"
    title="${label}"
  >
    ${entries.map(([name, s], i) => {
      const lines = s.succeeded + s.failed + s.running
      return lines > 0
        ? html`<span
            class="p${i % COLOURS}"
            style="width:${width(lines)}%"
            title="${name}: ${lines} lines"
          ></span>`
        : ''
    })}
  </div>`
}

/**
 * The projected finish as a time and, apart, how long until then ("expected to finish
 * 2026-12-01 14:05 UTC, in 3 min 20 s"); the window's time left is shown on its own.
 */
export function etaText(batch: BatchRecord, now = nowSeconds()): string {
  if (batch.finishedAt !== null) return `finished ${utc(batch.finishedAt)}`
  const eta = batchEta(batch)
  if (eta === null) return 'not known yet'
  return `expected to finish ${utc(eta)}, ${eta - now >= 1 ? `in ${duration(eta - now)}` : 'any moment now'}`
}

/** "2 h 5 min", "3 min 20 s", "45 s". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds))
  const h = Math.floor(s / 3600)
  const m = Math.floor((s % 3600) / 60)
  if (h > 0) return `${h} h ${m} min`
  if (m > 0) return s % 60 > 0 ? `${m} min ${s % 60} s` : `${m} min`
  return `${s} s`
}

export function routingSection(batch: BatchRecord, shares: Record<string, ProviderShare>): Html {
  const entries = Object.entries(shares)
  const waiting = currentWaiting(batch.waiting, nowSeconds())
  return html`<section id="routing">
    <h2>Routing</h2>
    ${
      waiting
        ? html`<div class="notice" id="waiting" role="status">
            <b>Waiting: <span class="mono">${waiting.code}</span></b>
            ${waiting.until !== undefined ? html` until ${utc(waiting.until)}` : ''}
            <br />${waiting.message}
          </div>`
        : ''
    }
    <p id="eta"><span class="dim small">ETA</span> <b>${etaText(batch)}</b></p>
    ${
      entries.length === 0
        ? html`<p class="dim small" id="providers-none">No line has reached a provider yet.</p>`
        : html`${providerBar(batch.counts.total, shares)}
            <table id="providers">
              <thead>
                <tr>
                  <th>Provider</th>
                  <th>Succeeded</th>
                  <th>Failed</th>
                  <th>Running</th>
                  <th>Cost</th>
                </tr>
              </thead>
              <tbody>
                ${entries.map(
                  ([name, s], i) =>
                    html`<tr data-provider="${name}">
                      <td><span class="swatch p${i % COLOURS}"></span> ${name}</td>
                      <td>${s.succeeded}</td>
                      <td>${s.failed}</td>
                      <td>
                        ${s.running}${
                          s.providerBatches
                            ? html`<span class="dim small provider-batches">
                                in ${s.providerBatches.count} provider
                                batch${s.providerBatches.count === 1 ? '' : 'es'}; live lanes from
                                ${utc(s.providerBatches.fallbackAt)} for lines not ended by
                                then</span
                              >`
                            : ''
                        }
                      </td>
                      <td>$${usd(s.costUsd)}</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
    }
  </section>`
}
