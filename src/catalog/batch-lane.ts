/**
 * A batch-lane offering's settings (docs/batch-lanes.md): `chunk_lines` (default 1,000), `min_hours_left`
 * (default 4), `fallback_hours` (default 2; both may be fractional) and `poll_s` (default 60),
 * and the caps of the provider's batch API. Only `lane: "batch"` offerings take these fields.
 */
import { z } from 'zod'

/** The fields a batch-lane offering may set; spread into the offering schema. */
export const batchLaneFields = {
  /** Most lines of one provider batch (within the provider's cap). */
  chunk_lines: z.number().int().min(1).max(100_000).optional(),
  /** A line goes to this lane only while its batch has at least this many hours left. */
  min_hours_left: z.number().min(0).max(720).optional(),
  /** A provider batch not ended this many hours before the deadline is cancelled upstream. */
  fallback_hours: z.number().min(0).max(720).optional(),
  /** Seconds between two polls of one provider batch (with backoff on failures). */
  poll_s: z.number().positive().max(86_400).optional(),
}

export const BATCH_LANE_FIELDS = Object.keys(batchLaneFields) as (keyof typeof batchLaneFields)[]

/** The providers' caps on one batch (docs/batch-lanes.md). */
export const BATCH_API_CAPS = {
  openai: { lines: 50_000, bytes: 200 * 1024 * 1024 },
  anthropic: { lines: 100_000, bytes: 256 * 1024 * 1024 },
} as const

/** A batch-lane offering's settings with their defaults, hours in milliseconds. */
export interface BatchLaneSettings {
  chunkLines: number
  minLeftMs: number
  fallbackMs: number
  pollMs: number
  maxLines: number
  maxBytes: number
}

type BatchFields = { [K in keyof typeof batchLaneFields]?: number }

const HOUR_MS = 3_600_000

/** The settings of one batch-lane offering of a provider of `kind`. */
export function batchLaneSettings(
  offering: BatchFields,
  kind: keyof typeof BATCH_API_CAPS,
): BatchLaneSettings {
  const caps = BATCH_API_CAPS[kind]
  return {
    chunkLines: Math.min(offering.chunk_lines ?? 1000, caps.lines),
    minLeftMs: (offering.min_hours_left ?? 4) * HOUR_MS,
    fallbackMs: (offering.fallback_hours ?? 2) * HOUR_MS,
    pollMs: (offering.poll_s ?? 60) * 1000,
    maxLines: caps.lines,
    maxBytes: caps.bytes,
  }
}

/**
 * Whether a line of a batch due at `deadlineMs` may go to the lane at `now` (docs/batch-lanes.md): at least
 * min_hours_left before the deadline, and before deadline − fallback_hours.
 */
export function batchLaneOpen(
  settings: BatchLaneSettings,
  deadlineMs: number,
  now: number,
): boolean {
  const left = deadlineMs - now
  return left >= settings.minLeftMs && left > settings.fallbackMs
}

/** The catalog problems of one offering's batch-lane fields (catalog-file.ts checkCatalog). */
export function batchLaneProblems(
  at: string,
  offering: BatchFields & { lane?: string },
  kind: keyof typeof BATCH_API_CAPS | undefined,
): string[] {
  const set = BATCH_LANE_FIELDS.filter((field) => offering[field] !== undefined)
  if (offering.lane !== 'batch')
    return set.map((field) => `${at}.${field}: only a "lane": "batch" offering takes ${field}`)
  if (kind === undefined) return []
  const cap = BATCH_API_CAPS[kind].lines
  if ((offering.chunk_lines ?? 0) > cap)
    return [
      `${at}.chunk_lines: ${kind}'s batch API takes at most ${cap} lines a batch; set ${cap} or less`,
    ]
  return []
}
