/**
 * The live call's types (docs/live.md): what the service is given, what a route hands it, what
 * it reports per charge, and how a stream is written for each surface.
 */
import type { FineTuneLookup } from '../catalog/fine-tunes.ts'
import type { Usage } from '../../providers/types.ts'
import type { Authenticator } from '../auth/authenticate.ts'
import type { Catalog } from '../catalog/catalog.ts'
import type { BodyLimit } from '../ingest/read-body.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import type { Logger } from '../telemetry/logger.ts'
import type { NativeRequest, Upstreams } from '../upstream/upstreams.ts'
import type { LiveCredit } from './live-credit.ts'

export interface LiveDeps {
  auth: Authenticator
  credit: LiveCredit
  catalog: Catalog
  upstreams: Upstreams
  logger: Logger
  createdAt: number
  /** The body limit of a live call (MULTIGRID_MAX_LIVE_BODY_BYTES, body-limits.ts). */
  bodyLimit: BodyLimit
  /** An account's active fine-tunes (the fine-tune directory: cached). */
  fineTunes: (accountId: string) => Promise<FineTuneLookup>
  /** Where a call's json_schema is compiled, within its budget (docs/structured-outputs.md). */
  schemaChecks: SchemaChecks
  /** Told of each call's charge: the usage report and the metrics count it (docs/operations.md). */
  charged?: (charge: LiveCharge) => void
}

/** A live call as charged, its costs in units of money/fixed-point.ts (10⁻¹⁸ USD). */
export interface LiveCharge {
  accountId: string
  model: string
  provider: string
  usage: Usage
  costUnits: bigint
  /** The same usage on the model's first listed offering. */
  firstOfferingCostUnits: bigint
}

/**
 * How a streamed chat call is written to the client: OpenAI's chunks as they are by default; the
 * Anthropic and Responses surfaces translate each chunk into their own events (docs/clients/anthropic-sdk.md).
 */
export interface StreamRender {
  /** The text written for one chat.completion.chunk (may be empty). */
  chunk(value: Record<string, unknown>): string
  /** The text written once the upstream ended, with the usage it reported. */
  end(usage: Usage | null): string
  /** The text written when the upstream broke off mid-stream. */
  broken(): string
}

/**
 * A call as read: who, and the chat body that is validated, priced and held. `passThrough` is set
 * for a call in a provider's own API (the Responses API, Anthropic's Messages): sent as it came to
 * the offerings that speak that API, as the chat body to the others, and answered in that API's
 * shape either way (catalog/speaks-api.ts).
 */
export interface LiveInput {
  caller: Awaited<ReturnType<Authenticator['authenticate']>>
  raw: unknown
  passThrough?: NativeCall
}

/** A call in a provider's own API, and how a chat answer to it is written in that API. */
export interface NativeCall extends NativeRequest {
  /**
   * Set when the chat body leaves out fields of `body` it cannot translate: only offerings that
   * speak `api` may take the call, and this is the refusal when none of its offerings does.
   */
  untranslated?: Error
  /** A chat completion from an offering that does not speak `api`, as that API's answer. */
  fromChat(answer: Record<string, unknown>): Record<string, unknown>
  /**
   * How a stream is written: an offering that speaks `api` sent its own events (`native`), the
   * others chat chunks, translated into that API's events. Made once the stream is open.
   */
  streamRender(native: boolean): StreamRender
}
