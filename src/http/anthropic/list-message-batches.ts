/**
 * Anthropic's batch list paging (`limit`, `after_id`, `before_id`; newest first) over the
 * account's native batches, keeping the Message Batches: those made through the Anthropic API, and
 * native retries of them, which keep their `/v1/messages` endpoint. The store pages by
 * `after` only, so a page is gathered from its pages; the scan is bounded, and a list deeper than
 * the bound ends there (has_more false) rather than reading without end.
 */
import { MESSAGES_URL, type BatchRecord } from '../../domain.ts'
import type { BatchStore } from '../../store/store.ts'

/** The most batches one list reads from the store, whatever it keeps. */
const SCAN_LIMIT = 10_000
const STORE_PAGE = 100

export interface MessageBatchPage {
  batches: BatchRecord[]
  hasMore: boolean
}

/** A Message Batch: made through the Anthropic API, or a native retry of one (docs/clients/anthropic-sdk.md). */
export const isMessageBatch = (batch: BatchRecord) =>
  batch.source === 'anthropic' || batch.endpoint === MESSAGES_URL

async function* anthropicBatches(store: BatchStore, accountId: string, after: string | null) {
  let cursor = after
  for (let scanned = 0; scanned < SCAN_LIMIT; scanned += STORE_PAGE) {
    const page = await store.listBatches(accountId, { limit: STORE_PAGE, after: cursor })
    for (const batch of page.batches) if (isMessageBatch(batch)) yield batch
    if (!page.hasMore || page.batches.length === 0) return
    cursor = page.batches[page.batches.length - 1].id
  }
}

/** Native ids in, native ids out; `afterId` wins over `beforeId` when both are sent. */
export async function listMessageBatches(
  store: BatchStore,
  accountId: string,
  query: { limit: number; afterId: string | null; beforeId: string | null },
): Promise<MessageBatchPage> {
  const { limit } = query
  if (query.afterId !== null || query.beforeId === null) {
    const batches: BatchRecord[] = []
    for await (const batch of anthropicBatches(store, accountId, query.afterId)) {
      if (batches.length === limit) return { batches, hasMore: true }
      batches.push(batch)
    }
    return { batches, hasMore: false }
  }
  // before_id: the `limit` batches just newer than it, still newest first. Ids order the list
  // (as `after_id`'s do), so an id no longer listed, deleted say, still marks its place.
  const newer: BatchRecord[] = []
  for await (const batch of anthropicBatches(store, accountId, null)) {
    if (batch.id <= query.beforeId) break
    newer.push(batch)
  }
  return { batches: newer.slice(-limit), hasMore: newer.length > limit }
}
