/**
 * A live call before it is sent (docs/live.md): its body validated as a batch line's would be,
 * its ceiling priced, and that ceiling held from the instance's credit ledger (live-credit.ts) —
 * 402 when it does not fit, 429 when it would pass the account's daily spend limit.
 */
import { isFineTuneId, NO_FINE_TUNES } from '../catalog/fine-tunes.ts'
import type { ModelEntry, Offering } from '../catalog/catalog-file.ts'
import type { Endpoint, FineTune, PassThrough } from '../../providers/types.ts'
import { requestedOutputTokens } from '../../providers/output-limit.ts'
import { dailyLimitRefusal } from '../admission/submit-batch.ts'
import { badRequest, refuse } from '../errors.ts'
import { compileProblems } from '../ingest/check-structured.ts'
import { validateBody, type BodyProblem } from '../ingest/validate-body.ts'
import { Money, usd } from '../money/decimal.ts'
import { unitsText } from '../money/fixed-point.ts'
import { ceilingUnits } from '../pricing/ceiling-rates.ts'
import { offeringsTaking } from '../catalog/speaks-api.ts'
import type { Reservation } from './live-credit.ts'
import type { LiveDeps, LiveInput } from './live-types.ts'

/** A call validated and held: what is sent, and what it is settled against. */
export interface HeldCall {
  caller: LiveInput['caller']
  model: ModelEntry
  body: Record<string, unknown>
  offerings: Offering[]
  inputTokens: number
  outputTokens: number
  reservation: Reservation
  fineTune?: FineTune
}

/** Validates `input` for `endpoint` and holds its ceiling; throws the refusal otherwise. */
export async function holdCall(
  deps: Pick<LiveDeps, 'catalog' | 'fineTunes' | 'schemaChecks' | 'credit'>,
  input: LiveInput,
  endpoint: Endpoint,
): Promise<HeldCall> {
  const { caller, raw } = input
  // Only a call that names an `ft:` model looks the account's fine-tunes up.
  const named = (raw as { model?: unknown } | null)?.model
  const fineTunes =
    typeof named === 'string' && isFineTuneId(named)
      ? await deps.fineTunes(caller.account.id)
      : NO_FINE_TUNES
  const checked = validateBody(raw, endpoint, deps.catalog, { live: true, fineTunes })
  // Within its bounds (checked above): compiled on a schema thread, refused past the budget.
  const schemaText = checked.ok ? checked.value.schemaText : undefined
  if (schemaText !== undefined) {
    const verdict = await deps.schemaChecks.compile(schemaText, caller.account.id)
    const { problem } = compileProblems(verdict, (field) => field)
    if (problem)
      throw badRequest(`${problem.path} ${problem.message}; ${problem.fix}`, problem.path)
  }
  if (!checked.ok) throw bodyRefusal(checked.problems[0])
  const { inputTokens, outputTokens, fineTune, rates } = checked.value
  // Priced on all of the routing's offerings, the ceiling covers the fewer a call may be kept to.
  const offerings = offeringsTaking(deps.catalog, checked.value.offerings, input.passThrough)
  if (!offerings) throw input.passThrough!.untranslated
  // The same pessimistic arithmetic as a batch's ceiling (priceOf at ceilingRates), so the two
  // can never disagree, in integers: this runs on every call.
  const ceiling = ceilingUnits({ input: inputTokens, output: outputTokens }, rates)
  // Held before it is sent: from this instance's lease of the account's credit (no store
  // write unless the lease must grow), atomically against every other holder.
  const held = await deps.credit.reserve(caller.account.id, ceiling)
  if (!held.ok && held.dailyLimit) throw dailyLimitRefusal(held.dailyLimit, 'this request')
  if (!held.ok) {
    // Shown as a batch's ceiling is: rounded up to a millionth of a dollar (the hold is exact).
    const ceilingUsd = usd(new Money(unitsText(ceiling)).toDecimalPlaces(6, Money.ROUND_UP))
    const fix =
      endpoint === 'chat'
        ? lowerOutputFix(
            raw as Record<string, unknown>,
            checked.value.model,
            input.passThrough?.api,
          )
        : 'add credit or send less input'
    throw refuse(
      'insufficient_quota',
      `this request may cost up to $${ceilingUsd} and the account has $${usd(held.availableUsd)} available; ${fix}`,
      { detail: { cost_ceiling_usd: ceilingUsd, available_usd: usd(held.availableUsd) } },
    )
  }
  return {
    caller,
    model: checked.value.model,
    body: raw as Record<string, unknown>,
    offerings,
    inputTokens,
    outputTokens,
    reservation: held.reservation,
    fineTune: fineTune ? { name: fineTune.id, path: fineTune.source } : undefined,
  }
}

/**
 * What lowers a refused call's ceiling. A body that sets no output limit is priced at the model's
 * own (tens of thousands of tokens for the newer ones): most of the ceiling, and not obvious.
 */
function lowerOutputFix(
  body: Record<string, unknown>,
  model: ModelEntry,
  api: PassThrough | undefined,
): string {
  const param = api === 'responses' ? 'max_output_tokens' : 'max_tokens'
  if (requestedOutputTokens(body) !== undefined) return `add credit or lower ${param}`
  return `the request sets no ${param}, so it is priced at the model's limit of ${model.max_output_tokens} output tokens: set ${param} to what the answer needs, or add credit`
}

/** The first problem of a body as the refusal a live caller gets. */
export function bodyRefusal(problem: BodyProblem) {
  const message = `${problem.path || 'body'} ${problem.message}; ${problem.fix}`
  // As OpenAI answers a model the caller cannot use: 404 model_not_found.
  if (problem.code === 'model_not_found')
    return refuse('model_not_found', message, { param: problem.path || null })
  return badRequest(message, problem.path || null)
}
