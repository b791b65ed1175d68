/**
 * A live call after its answer (docs/live.md): priced from its usage as a batch line is
 * (pricing/price-usage.ts), in ledger units, settled once against its hold, and told to whoever
 * counts charges. An answer without usage is billed on a bound (pricing/bill-on-bound.ts).
 */
import type { Offering } from '../catalog/catalog-file.ts'
import type { Usage } from '../../providers/types.ts'
import { answerBytes, usageOnBound } from '../pricing/bill-on-bound.ts'
import { priceUsageUnits } from '../pricing/price-usage.ts'
import type { HeldCall } from './hold-call.ts'
import type { LiveDeps } from './live-types.ts'

type SettleDeps = Pick<LiveDeps, 'credit' | 'charged' | 'logger'>

/** The usage billed on the bound of a call's tokens, for an answer of `outputBytes`. */
export const usageOnCallBound = (held: HeldCall, outputBytes: number) =>
  usageOnBound({ input: held.inputTokens, output: held.outputTokens }, outputBytes)

/** The usage a whole answer is billed on: its own, or the bound when it reported none. */
export function billedUsage(
  deps: SettleDeps,
  held: HeldCall,
  answer: { usage: Usage | null; body: Record<string, unknown> },
  offering: Offering,
): Usage {
  if (answer.usage) return answer.usage
  deps.logger.warn('live.no_usage', { provider: offering.provider, model: offering.upstream_model })
  return usageOnCallBound(held, answerBytes(answer.body))
}

/** Settles the call on `usage` and tells whoever counts charges. */
export function settleCall(deps: SettleDeps, held: HeldCall, usage: Usage, offering: Offering) {
  // Settled once: a second settle is ignored by the ledger, and so is its charge here.
  if (held.reservation.settled) return
  const units = priceUsageUnits(usage, offering)
  deps.credit.settle(held.reservation, units)
  if (!deps.charged) return
  const first = held.model.offerings[0]
  deps.charged({
    accountId: held.caller.account.id,
    model: held.model.id,
    provider: offering.provider,
    usage,
    costUnits: units,
    firstOfferingCostUnits: first === offering ? units : priceUsageUnits(usage, first),
  })
}

/** Gives the whole hold back: the call failed, threw or was abandoned (a settled one is left alone). */
export function releaseCall(deps: Pick<LiveDeps, 'credit'>, held: HeldCall) {
  deps.credit.settle(held.reservation, null)
}
