/**
 * The planner's batch-lane rule (docs/routing.md, docs/batch-lanes.md): a batch-lane offering is one more offering in
 * the planner's order (cheapest first). A line goes to it when it is the first offering of that
 * order and the lane is open for the line's batch (min_hours_left left, before deadline −
 * fallback_hours); otherwise the live lanes serve it, as they serve every live call. Only kinds
 * openai and anthropic have batch APIs.
 */
import {
  batchLaneOpen,
  batchLaneSettings,
  type BatchLaneSettings,
} from '../../catalog/batch-lane.ts'
import {
  hasBatchLane,
  laneOf,
  type ModelEntry,
  type Offering,
  type ProviderConfig,
} from '../../catalog/catalog-file.ts'
import { firstBatchLane, laneKey, type LaneLine } from '../../catalog/lane-mark.ts'
import { capPromptBound } from '../../pricing/cap-bound.ts'
import { offeringName } from '../../catalog/lanes.ts'
import { speaksApi } from '../../catalog/speaks-api.ts'
import { lineRequest, type LineRequest } from '../line-request.ts'
import { endpointOf, type Catalog } from '../../catalog/catalog.ts'
import { ENDPOINT_URLS, MESSAGES_URL, RESPONSES_URL } from '../../domain.ts'
import type { ChunkEndpoint } from '../../store/batch-chunks/chunk-store.ts'
import type { Routing } from '../../schemas/requests.ts'
import type { PassThrough } from '../../../providers/types.ts'

type Kind = 'openai' | 'anthropic'

export interface BatchLaneChoice {
  offering: Offering
  settings: BatchLaneSettings
}

/** The API of a line outside its chat translation (LineRequest's `untranslated`), or null. */
function untranslatedApi(request: LineRequest): PassThrough | null {
  return request.native?.untranslated === undefined ? null : request.native.api
}

/**
 * The API a batch lane on `provider` takes requests in as they came, besides chat completions:
 * Anthropic's Messages, or the Responses API where the provider speaks it; null for neither.
 */
export function laneSpeaks(provider: ProviderConfig | undefined): 'messages' | 'responses' | null {
  if (speaksApi(provider, 'messages')) return 'messages'
  return speaksApi(provider, 'responses') ? 'responses' : null
}

/**
 * The batch lane a line goes to now: the one it is marked for by the same rule
 * (firstBatchLane), when that lane is open for the line's batch and its provider has a batch
 * client; null for the live lanes.
 */
export function laneForLine(
  catalog: Pick<Catalog, 'find' | 'routeWithLanes' | 'provider'>,
  input: string,
  at: { deadlineMs: number; nowMs: number; hasClient: (provider: string) => boolean },
): (BatchLaneChoice & { model: ModelEntry }) | null {
  const parsed = JSON.parse(input) as { url: string; body: Record<string, unknown> }
  const model = catalog.find(String(parsed.body.model))
  const request = lineRequest(parsed)
  if (!model || 'problem' in request) return null
  const routing = parsed.body.provider as Routing | undefined
  const capBound = capPromptBound(catalog, endpointOf(parsed.url), request.body, model)
  const lane = firstBatchLane(catalog, { model, routing, capBound }, untranslatedApi(request))
  if (!lane || !at.hasClient(lane.provider)) return null
  const kindOf = (name: string) => catalog.provider(name)?.kind
  const choice = openLane(lane, at.deadlineMs, at.nowMs, kindOf)
  return choice && { ...choice, model }
}

/** A catalog's models that list a batch-lane offering, found once per catalog. */
const laneModelsOf = new WeakMap<readonly ModelEntry[], readonly ModelEntry[]>()

/**
 * The batch lanes (laneKey) open now for a batch with this deadline, on a provider with a batch
 * client: the lane engine claims the lines marked for them (NewLine.batchLane), and the live
 * lanes leave those lines to it. A line whose lane closed is the live lanes' from then on.
 */
export function openBatchLanes(
  catalog: Pick<Catalog, 'models' | 'provider'>,
  at: { deadlineMs: number; nowMs: number; hasClient: (provider: string) => boolean },
): string[] {
  let models = laneModelsOf.get(catalog.models)
  if (!models) laneModelsOf.set(catalog.models, (models = catalog.models.filter(hasBatchLane)))
  const kindOf = (name: string) => catalog.provider(name)?.kind
  const open: string[] = []
  for (const model of models)
    for (const offering of model.offerings) {
      if (laneOf(offering) !== 'batch' || !at.hasClient(offering.provider)) continue
      if (openLane(offering, at.deadlineMs, at.nowMs, kindOf))
        open.push(laneKey(model.id, offering.provider))
    }
  return open
}

/** What a chunk of a batch's lines holds, by the URL they name (ChunkEndpoint). */
export function chunkEndpoint(url: string): ChunkEndpoint {
  if (url === ENDPOINT_URLS.embeddings) return 'embeddings'
  if (url === MESSAGES_URL) return 'messages'
  return url === RESPONSES_URL ? 'responses' : 'chat'
}

/** The batch lane a line of this batch goes to now, or null for the live lanes. */
export function chooseBatchLane(
  ordered: readonly Offering[],
  deadlineMs: number,
  nowMs: number,
  kindOf: (provider: string) => Kind | undefined,
): BatchLaneChoice | null {
  const first = ordered[0]
  if (!first || laneOf(first) !== 'batch') return null
  return openLane(first, deadlineMs, nowMs, kindOf)
}

/** A batch-lane offering with its settings, when it takes lines now (a kind with a batch API). */
function openLane(
  lane: Offering,
  deadlineMs: number,
  nowMs: number,
  kindOf: (provider: string) => Kind | undefined,
): BatchLaneChoice | null {
  const kind = kindOf(lane.provider)
  if (kind === undefined) return null
  const settings = batchLaneSettings(lane, kind)
  return batchLaneOpen(settings, deadlineMs, nowMs) ? { offering: lane, settings } : null
}

/** The offerings a live call or a live-lane line may use: every lane but the batch APIs'. */
export function liveOfferings(ordered: readonly Offering[]): Offering[] {
  return ordered.filter((offering) => laneOf(offering) !== 'batch')
}

/** While its lane still takes lines, a line kept for it is looked at again after this long (ms). */
const LANE_RETAKE_MS = 1_000

/** A line kept for a batch lane (heldForLane): when it is looked at again, and the lane if it has closed. */
export interface LaneHold {
  untilMs: number
  /** Set once the lane takes no more lines: the line then waits for the deadline, which ends it. */
  closed?: { lane: string; closedAtMs: number }
}

/**
 * With `allow_fallbacks: false` a batch line keeps to one offering (docs/routing.md). When that is a
 * batch lane — first in the planner's order, and open when the line's batch was created (still a
 * moment later) — the live lanes never send the line: while the lane still takes lines it waits
 * for the lane, after that for the deadline, which ends it `expired`. Returns when the line may be
 * looked at again, or null when the live lanes may send it (fallbacks allowed, another offering
 * first, or a window too short for the lane from the start, so the first live offering is the one).
 */
export function heldForLane(
  catalog: Pick<Catalog, 'routeWithLanes' | 'provider'>,
  line: LaneLine & { request: LineRequest },
  batch: { createdAt: number; deadlineAt: number },
  nowMs: number,
): LaneHold | null {
  if (line.routing?.allow_fallbacks !== false) return null
  const first = firstBatchLane(catalog, line, untranslatedApi(line.request))
  if (!first) return null
  const kindOf = (name: string) => catalog.provider(name)?.kind
  const deadlineMs = batch.deadlineAt * 1000
  // Open a retake after creation too: a window of just min_hours_left opens the lane for an
  // instant the lane engine cannot use, and the line would wait for nothing. (A lane open for
  // seconds does take lines: a longer bound would send them live.)
  const opened = openLane(first, deadlineMs, batch.createdAt * 1000 + LANE_RETAKE_MS, kindOf)
  if (!opened) return null
  if (openLane(first, deadlineMs, nowMs, kindOf)) return { untilMs: nowMs + LANE_RETAKE_MS }
  const { minLeftMs, fallbackMs } = opened.settings
  const closedAtMs = deadlineMs - Math.max(minLeftMs, fallbackMs)
  return { untilMs: deadlineMs, closed: { lane: offeringName(first), closedAtMs } }
}
