/**
 * The batch page's tokens by class (docs/pricing.md): every prompt token, the parts read from and
 * written to the providers' prompt caches, the output; and what caching saved against the price
 * of the same lines with every prompt token uncached (a write costs more than an uncached token,
 * so a batch that only wrote its cache shows what that cost instead).
 */
import type { BatchRecord } from '../../domain.ts'
import { Money, usd } from '../../money/decimal.ts'
import { html, type Html } from './html.ts'

const count = (n: number) => n.toLocaleString('en-US')

export function usageSection(batch: BatchRecord): Html {
  const u = batch.usage
  const uncachedInput = u.inputTokens - u.cachedInputTokens - u.cacheWriteTokens
  const saved = new Money(u.uncachedCostUsd).minus(batch.costUsd)
  const savedText = saved.isZero()
    ? 'Caching changed nothing: no prompt token was read from or written to a cache.'
    : saved.isPositive()
      ? `Caching saved $${usd(saved)} against the uncached price of $${usd(u.uncachedCostUsd)}.`
      : `Cache writes cost $${usd(saved.negated())} more than the uncached price of $${usd(u.uncachedCostUsd)}; reads of them later are what saves.`
  return html`<section id="usage">
    <h2>Tokens</h2>
    <table>
      <tbody>
        <tr>
          <td>Prompt</td>
          <td id="usage-input">${count(u.inputTokens)}</td>
        </tr>
        <tr>
          <td class="dim">of which uncached</td>
          <td id="usage-uncached">${count(Math.max(0, uncachedInput))}</td>
        </tr>
        <tr>
          <td class="dim">read from cache</td>
          <td id="usage-cached">${count(u.cachedInputTokens)}</td>
        </tr>
        <tr>
          <td class="dim">written to cache</td>
          <td id="usage-written">${count(u.cacheWriteTokens)}</td>
        </tr>
        <tr>
          <td>Output</td>
          <td id="usage-output">${count(u.outputTokens)}</td>
        </tr>
      </tbody>
    </table>
    <p id="cache-saving" class="small">${savedText}</p>
  </section>`
}
