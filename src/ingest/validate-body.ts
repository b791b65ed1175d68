/**
 * Checks one request body against its endpoint's schema and the catalog, and bounds its cost.
 * Shared by batch lines and the live endpoints, so a batch is never admitted that the live
 * gateway would refuse.
 */
import {
  FINE_TUNE_NOT_FOUND,
  isFineTuneId,
  loraOfferings,
  NO_FINE_TUNES,
  type FineTuneLookup,
  type FineTuneRecord,
} from '../catalog/fine-tunes.ts'
import { laneOf, type ModelEntry, type Offering } from '../catalog/catalog-file.ts'
import { offeringName } from '../catalog/lanes.ts'
import type { Endpoint } from '../../providers/types.ts'
import { linePrices, upstreamTargets, type Catalog, type PromptBound } from '../catalog/catalog.ts'
import { nearModelNames } from '../catalog/near-model-names.ts'
import { ENDPOINT_URLS } from '../domain.ts'
import { chatInputBound, chatOutputBound, embeddingsInputBound } from '../pricing/ceiling.ts'
import { requestedOutputTokens } from '../../providers/output-limit.ts'
import { asksOneHourCache, ceilingRates, type CeilingRates } from '../pricing/ceiling-rates.ts'
import { capPromptBound } from '../pricing/cap-bound.ts'
import {
  chatBodySchema,
  embeddingsBodySchema,
  type ChatBody,
  type EmbeddingsBody,
} from '../schemas/requests.ts'
import { compileSchema } from '../schemas/compile.ts'
import { excerpt } from '../excerpt.ts'
import { Money } from '../money/decimal.ts'
import { describeZodIssue, type BodyProblem } from './issues.ts'
import { guidedProblems, jsonObjectProblem, structuredProblems } from './check-structured.ts'
import { noMessageLeft, untranslatedFields } from './untranslated-fields.ts'
import { setsNothing } from './no-op-params.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-depth.ts'
import { tierRefusal, TIER_FIX } from './service-tier.ts'

const chatSchema = compileSchema(chatBodySchema)
const embeddingsSchema = compileSchema(embeddingsBodySchema)

export type { BodyProblem } from './issues.ts'

export interface AcceptedBody {
  /** The base model, when the body names a fine-tune. */
  model: ModelEntry
  /** The fine-tune `body.model` names, or null for a catalog model. */
  fineTune: FineTuneRecord | null
  offerings: Offering[]
  inputTokens: number
  outputTokens: number
  /** The rates its ceiling is priced at (pricing/ceiling-rates.ts, docs/pricing.md). */
  rates: CeilingRates
  /** Its prompt bound for its price cap's long-context tiers, as the routes take it (catalog.ts). */
  capBound: PromptBound
  body: ChatBody | EmbeddingsBody
  /** What a dry run points out about the body; none: []. */
  warnings: BodyProblem[]
  /**
   * A json_schema within its bounds, as JSON text, not yet compiled: the caller compiles it off
   * its thread (src/schemas/schema-checks.ts) and refuses the body if it does not compile.
   */
  schemaText?: string
}

/**
 * How a body is checked. `prefix`: where the body sits in the caller's document ("body" for a
 * batch line; default: the document is the body). `live`: a live call (it may stream; routed in
 * catalog order). `shallow`: the caller knows the body cannot nest too deep (its text is too
 * short to). `fineTunes`: the caller's active fine-tunes, which `ft:` model ids are looked up in.
 * A batch builds its options once, not once a line.
 */
export interface BodyOptions {
  prefix?: string
  live?: boolean
  shallow?: boolean
  fineTunes?: FineTuneLookup
}

export type BodyVerdict = { ok: true; value: AcceptedBody } | { ok: false; problems: BodyProblem[] }

export function validateBody(
  raw: unknown,
  endpoint: Endpoint,
  catalog: Catalog,
  options: BodyOptions = {},
): BodyVerdict {
  const prefix = options.prefix ?? ''
  const refused = shapeRefusal(raw, endpoint, prefix, options.shallow === true)
  if (refused) return refused
  const record = withoutNulls(raw as Record<string, unknown>)
  const at = pathsUnder(prefix)
  // Refusals first, with their own words, before the generic schema errors.
  const problems = ownRefusals(record, endpoint, options.live === true, at)
  const named = typeof record.model === 'string' ? record.model : null
  // An `ft:` id is the caller's fine-tune or nothing: one answer for unknown, another account's and
  // inactive ids, so that ids cannot be probed (docs/open-models.md).
  const fineTune = named !== null && isFineTuneId(named) ? resolveFineTune(named, options) : null
  const model =
    named === null
      ? undefined
      : isFineTuneId(named)
        ? fineTune
          ? catalog.find(fineTune.baseModel)
          : undefined
        : catalog.find(named)
  if (named !== null && !model) problems.push(unknownModel(catalog, endpoint, named, at))
  const parsed = (endpoint === 'chat' ? chatSchema : embeddingsSchema).check(record)
  if (!parsed.success) {
    for (const issue of parsed.issues) {
      const described = describeZodIssue(issue, prefix)
      if (!problems.some((p) => p.path === described.path)) problems.push(described)
    }
  }
  // Once response_format has its shape: the schema compiles, the answer is bounded.
  let warnings: BodyProblem[] = []
  let schemaText: string | undefined
  const formatAt = at('response_format')
  if (
    endpoint === 'chat' &&
    !problems.some((p) => p.path === formatAt || p.path.startsWith(formatAt + '.'))
  ) {
    const structured = structuredProblems(record as ChatBody, model, at, options.live === true)
    for (const problem of structured.problems) {
      if (!problems.some((p) => p.path === problem.path)) problems.push(problem)
    }
    warnings = structured.warnings
    schemaText = structured.schemaText
  }
  if (!model) return { ok: false, problems }
  if (!model.endpoints.includes(endpoint)) {
    problems.push(wrongEndpoint(model, endpoint, at))
    return { ok: false, problems }
  }
  unsupportedParams(problems, record, model, at)
  if (endpoint === 'chat') outputCaps(problems, record, model, at)
  if (!parsed.success || problems.length > 0) return { ok: false, problems }
  const body = parsed.data
  if (catalog.usable(model).length === 0)
    return { ok: false, problems: [noProviderConfigured(catalog, model, at)] }
  // A batch line goes where the planner sends it (cheapest first), a live call in catalog order:
  // with allow_fallbacks false that is not always the same offering, nor the same ceiling.
  const live = options.live === true
  // A cap below a long-context tier leaves that offering out of a prompt that may reach the tier.
  const capBound = capPromptBound(catalog, endpoint, body, model)
  const routed = routeFor(catalog, model, body.provider, { live, capBound })
  // Only providers that load fine-tunes serve a fine-tune's lines, at its base's prices.
  const offerings = fineTune ? loraOfferings(catalog, routed) : routed
  if (fineTune && offerings.length === 0)
    return {
      ok: false,
      problems: [fineTuneUnserved(catalog, model, body.provider, { at, live, capBound })],
    }
  if (offerings.length === 0 && body.provider?.max_price) {
    // The other routing fields left some: it is the price cap that leaves none.
    const uncapped = routeFor(catalog, model, { ...body.provider, max_price: undefined }, { live })
    if (uncapped.length > 0) {
      const laneMeetsCap =
        !live && catalog.routeWithLanes(model, body.provider, capBound).length > 0
      const tokens = capBound(catalog.usable(model))
      const problem = priceCapIssue(at, model, { offerings: uncapped, tokens }, laneMeetsCap)
      return { ok: false, problems: [problem] }
    }
  }
  if (offerings.length === 0)
    return { ok: false, problems: [noProviderLeft(catalog, model, body.provider, at)] }
  // A batch line may also go to a provider's batch API (docs/batch-lanes.md): its ceiling counts
  // those lanes' prices too, whichever is dearer.
  const priced =
    live || fineTune ? offerings : catalog.routeWithLanes(model, body.provider, capBound)
  if (endpoint === 'chat') {
    const chat = body as ChatBody
    const targets = upstreamTargets(catalog, offerings)
    const unsendable =
      jsonObjectProblem(chat, model, targets, at) ??
      noMessageLeft(chat.messages, model, targets, at)
    if (unsendable) return { ok: false, problems: [unsendable] }
    const dropped = untranslatedFields(record, model, targets, at)
    if (dropped.length > 0) return { ok: false, problems: dropped }
    const inputTokens = chatInputBound(chat, model, targets)
    // A batch line's quote says why a line without an output limit is held at the model's whole.
    const unlimited = !live && requestedOutputTokens(chat) === undefined
    return {
      ok: true,
      value: {
        model,
        fineTune,
        offerings,
        body,
        inputTokens,
        outputTokens: chatOutputBound(chat, model),
        rates: ceilingRates(priced, {
          promptBound: inputTokens,
          ttl1h: asksOneHourCache(chat as Record<string, unknown>),
        }),
        capBound,
        warnings: unlimited ? [...warnings, noOutputLimit(model, at)] : warnings,
        schemaText,
      },
    }
  }
  const inputTokens = embeddingsInputBound(body as EmbeddingsBody)
  return {
    ok: true,
    value: {
      model,
      fineTune,
      offerings,
      body,
      inputTokens,
      outputTokens: 0,
      rates: ceilingRates(priced, { promptBound: inputTokens, ttl1h: false }),
      capBound,
      warnings,
    },
  }
}

/**
 * The body without its top-level fields set to null: OpenAI's optional parameters are nullable,
 * and null means not set (Python's `max_tokens=None` sends it). `model`, `messages` and `input`
 * are kept, so a null there is refused as missing. A copy only when there is one.
 */
function withoutNulls(record: Record<string, unknown>): Record<string, unknown> {
  let copy: Record<string, unknown> | null = null
  for (const key in record) {
    if (record[key] !== null || key === 'model' || key === 'messages' || key === 'input') continue
    copy ??= { ...record }
    delete copy[key]
  }
  return copy ?? record
}

/** A field's path under the body's prefix. */
type PathOf = (field: string) => string

// One path function a prefix, made once: a batch asks for one on each of its lines.
const pathFunctions = new Map<string, PathOf>()
function pathsUnder(prefix: string): PathOf {
  let at = pathFunctions.get(prefix)
  if (!at) {
    // Called several times a line: a concatenation, not an array filtered and joined.
    at =
      prefix === ''
        ? (field: string) => field
        : (field: string) => (field === '' ? prefix : `${prefix}.${field}`)
    pathFunctions.set(prefix, at)
  }
  return at
}

/** A body that is not a JSON object, or nests too deep to be read; null when it is neither. */
function shapeRefusal(
  raw: unknown,
  endpoint: Endpoint,
  prefix: string,
  shallow: boolean,
): { ok: false; problems: BodyProblem[] } | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return {
      ok: false,
      problems: [
        {
          path: prefix,
          message: 'must be a JSON object',
          fix: `set ${prefix || 'the body'} to the request you would send to ${ENDPOINT_URLS[endpoint]}`,
        },
      ],
    }
  }
  if (!shallow && nestsDeeperThan(raw)) {
    return {
      ok: false,
      problems: [
        {
          path: prefix,
          message: `nests more than ${MAX_JSON_DEPTH} levels deep`,
          fix: 'flatten the request: no endpoint takes values nested this deep',
        },
      ],
    }
  }
  return null
}

/**
 * What the gateway refuses in its own words: a batch line that streams, n past 8, guided decoding,
 * a service tier other than the default.
 */
function ownRefusals(
  record: Record<string, unknown>,
  endpoint: Endpoint,
  live: boolean,
  at: PathOf,
): BodyProblem[] {
  const problems: BodyProblem[] = []
  if (endpoint === 'chat' && record.stream === true && !live) {
    problems.push({
      path: at('stream'),
      message: 'a batch line cannot stream',
      fix: 'remove stream or set it to false',
    })
  }
  if (endpoint === 'chat' && typeof record.n === 'number' && record.n > 8) {
    problems.push({
      path: at('n'),
      message: 'must be at most 8',
      fix: 'set n to 8 or less, or split the request into several lines',
    })
  }
  if (endpoint === 'chat') problems.push(...guidedProblems(record, at))
  const tier = tierRefusal(record.service_tier)
  if (tier) problems.push({ path: at('service_tier'), message: tier, fix: TIER_FIX })
  return problems
}

/** A model id the catalog does not have, or an `ft:` id that is not one of the caller's fine-tunes. */
function unknownModel(
  catalog: Catalog,
  endpoint: Endpoint,
  named: string,
  at: PathOf,
): BodyProblem {
  if (isFineTuneId(named)) {
    return {
      path: at('model'),
      code: 'model_not_found',
      message: FINE_TUNE_NOT_FOUND,
      fix: 'use the id of one of your active fine-tuned models, as GET /v1/models lists them',
    }
  }
  const message = `names an unknown model, ${JSON.stringify(excerpt(named))}`
  // A near name (another letter case, a typo) is the likelier fix than any example.
  const near = nearModelNames(catalog, named, endpoint)
  if (near.length > 0) {
    const fix = `did you mean ${near.join(' or ')}? GET /v1/models lists every model`
    return { path: at('model'), code: 'model_not_found', message, fix }
  }
  // Models that can run here: one whose only providers lack their keys is no example to follow.
  const examples = catalog.models
    .filter((m) => m.endpoints.includes(endpoint) && catalog.usable(m).length > 0)
    .slice(0, 3)
    .map((m) => m.id)
  return {
    path: at('model'),
    // As OpenAI answers an unknown model: a live call's 404 (hold-call.ts), the issue's code.
    code: 'model_not_found',
    message,
    fix: `use a model from GET /v1/models${examples.length ? `, for example ${examples.join(', ')}` : ''}`,
  }
}

function wrongEndpoint(model: ModelEntry, endpoint: Endpoint, at: PathOf): BodyProblem {
  const url = ENDPOINT_URLS[model.endpoints[0]]
  return {
    path: at('model'),
    message: `${model.id} does not serve ${ENDPOINT_URLS[endpoint]}`,
    fix: `use a ${endpoint} model, or send ${model.id} lines to ${url}`,
  }
}

/** The parameters the model does not take, each one a problem (one at its default sets nothing). */
function unsupportedParams(
  problems: BodyProblem[],
  record: Record<string, unknown>,
  model: ModelEntry,
  at: PathOf,
): void {
  for (const param of model.unsupported_params) {
    if (setsNothing(param, record[param])) continue
    problems.push({
      path: at(param),
      message: `is not supported by ${model.id}`,
      fix: `remove ${param}; ${model.id} would refuse or ignore it`,
    })
  }
}

/** A chat body's output limits past the model's own. */
function outputCaps(
  problems: BodyProblem[],
  record: Record<string, unknown>,
  model: ModelEntry,
  at: PathOf,
): void {
  for (const param of ['max_tokens', 'max_completion_tokens'] as const) {
    const value = record[param]
    if (typeof value === 'number' && value > model.max_output_tokens) {
      problems.push({
        path: at(param),
        message: `must be at most ${model.max_output_tokens} for ${model.id}`,
        fix: `set ${param} to ${model.max_output_tokens} or less`,
      })
    }
  }
}

/**
 * The offerings a body's routing leaves: a live call's in catalog order, a batch line's cheapest
 * first. `capBound`: its prompt bound, for a price cap below a long-context tier.
 */
function routeFor(
  catalog: Catalog,
  model: ModelEntry,
  routing: ChatBody['provider'],
  { live, capBound }: { live: boolean; capBound?: PromptBound },
): Offering[] {
  return live
    ? catalog.route(model, routing, capBound)
    : catalog.routeBatch(model, routing, capBound)
}

function noProviderConfigured(catalog: Catalog, model: ModelEntry, at: PathOf): BodyProblem {
  const missing = model.offerings.map((o) => catalog.missingKey(o.provider)).filter(Boolean)
  return {
    path: at('model'),
    message: `names ${model.id}, which no provider on this gateway is configured to serve`,
    fix: `ask the operator to set ${[...new Set(missing)].join(' or ')}, or use another model`,
  }
}

/**
 * A fine-tune's line that no provider loading fine-tunes can serve: none offers its base here (the
 * operator's to add), or the line's own provider object leaves them out (its to change, as a
 * base line's routing would be told).
 */
function fineTuneUnserved(
  catalog: Catalog,
  model: ModelEntry,
  routing: ChatBody['provider'],
  { at, live, capBound }: { at: PathOf; live: boolean; capBound: PromptBound },
): BodyProblem {
  const lora = loraOfferings(catalog, catalog.usable(model))
  if (lora.length === 0)
    return {
      path: at('model'),
      message: `names a fine-tune of ${model.id}, and no provider here that serves fine-tunes offers ${model.id}`,
      fix: `ask the operator for a provider with "lora": true offering ${model.id}, or use ${model.id} itself`,
    }
  if (routing?.max_price) {
    const uncapped = routeFor(catalog, model, { ...routing, max_price: undefined }, { live })
    const loraUncapped = loraOfferings(catalog, uncapped)
    if (loraUncapped.length > 0) {
      const tokens = capBound(catalog.usable(model))
      return priceCapIssue(at, model, { offerings: loraUncapped, tokens }, false)
    }
  }
  const names = [...new Set(lora.map(offeringName))]
  return {
    path: at('provider'),
    message: `leaves out every provider that serves fine-tunes of ${model.id}`,
    fix: `allow one of: ${names.join(', ')}`,
  }
}

/**
 * The fix names the offerings a line can be routed to, by the names routing takes ("openai",
 * "openai:flex"): not a batch lane, which needs a live or flex offering beside it to fall back on
 * (said when the routing leaves one alone).
 */
function noProviderLeft(
  catalog: Catalog,
  model: ModelEntry,
  routing: ChatBody['provider'],
  at: PathOf,
): BodyProblem {
  const usable = catalog.usable(model)
  const names = usable.filter((offering) => laneOf(offering) !== 'batch').map(offeringName)
  const laneLeft = catalog.routeWithLanes(model, routing).length > 0
  const lanes = laneLeft ? ' but a batch lane, which cannot serve a line alone' : ''
  // Every offering the routing names has a provider without its key here: the key is the fix.
  const named = model.offerings.filter((o) => routing?.only?.includes(offeringName(o)))
  const unkeyed = named.filter((o) => catalog.missingKey(o.provider) !== null)
  if (named.length > 0 && unkeyed.length === named.length) {
    const keys = [...new Set(unkeyed.map((o) => catalog.missingKey(o.provider)!))]
    const others = names.length > 0 ? `, or allow one of: ${[...new Set(names)].join(', ')}` : ''
    return {
      path: at('provider'),
      message: `leaves no configured provider for ${model.id}: ${[...new Set(unkeyed.map(offeringName))].join(', ')} has no API key on this gateway`,
      fix: `ask the operator to set ${keys.join(' or ')}${others}`,
    }
  }
  return {
    path: at('provider'),
    message: `leaves no configured provider for ${model.id}${lanes}`,
    fix: `allow one of: ${[...new Set(names)].join(', ')}`,
  }
}

function resolveFineTune(id: string, options: { fineTunes?: FineTuneLookup }) {
  return (options.fineTunes ?? NO_FINE_TUNES).get(id) ?? null
}

/**
 * A price cap no offering meets (`laneMeetsCap`: but a batch lane, which cannot serve a line
 * alone): the fix names the cheapest one's prices for this line (lowest prompt plus completion
 * price, exactly; its long-context tier's where the line's prompt bound, `tokens`, passes the
 * threshold), the cap that would let the line through. `tokens` is measured over every usable
 * offering of the model: no less than any route measures it (catalog.ts PromptBound).
 */
function priceCapIssue(
  at: PathOf,
  model: ModelEntry,
  { offerings, tokens }: { offerings: readonly Offering[]; tokens: number },
  laneMeetsCap: boolean,
): BodyProblem {
  const priced = offerings.map((o) => ({ o, prices: linePrices(o, tokens) }))
  const total = ({ prices }: (typeof priced)[number]) =>
    new Money(prices.prompt).plus(prices.completion)
  const cheapest = priced.reduce((best, p) => (total(p).lt(total(best)) ? p : best))
  // As the catalog (and GET /v1/models) writes them: "0.40", not "0.4".
  const { prompt, completion } = cheapest.prices
  const tier =
    prompt !== cheapest.o.input_usd_per_mtok || completion !== cheapest.o.output_usd_per_mtok
  const which = tier
    ? `long-context prices of ${model.id}'s cheapest ${laneMeetsCap ? 'live or flex ' : ''}offering (${offeringName(cheapest.o)}), billed past ${cheapest.o.long_context!.above_input_tokens} prompt tokens, which this one may reach (up to ${tokens})`
    : `prices of ${model.id}'s cheapest ${laneMeetsCap ? 'live or flex ' : ''}offering (${offeringName(cheapest.o)})`
  return {
    path: at('provider.max_price'),
    message: laneMeetsCap
      ? `leaves no offering of ${model.id} but a batch lane, which cannot serve a line alone: every live or flex one is dearer on prompt or completion`
      : `leaves no offering of ${model.id}: every one is dearer on prompt or completion`,
    fix: `raise max_price to at least {"prompt": "${prompt}", "completion": "${completion}"} (USD per million tokens), the ${which}`,
  }
}

/**
 * A batch line that sets no output limit: its answer may use the model's whole one, and its
 * ceiling holds that (a label's line quoted hundreds of times its cost), which the quote says.
 */
function noOutputLimit(model: ModelEntry, at: (field: string) => string): BodyProblem {
  return {
    path: at('max_tokens'),
    message: `max_tokens is not set, so an answer may use ${model.id}'s whole output limit, ${model.max_output_tokens.toLocaleString('en')} tokens, and the line is held at that`,
    fix: 'set max_tokens to the most an answer needs (a label takes a few tokens): the cost ceiling, and the credit a submit needs, fall with it',
  }
}
