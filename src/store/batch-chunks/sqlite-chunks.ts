/**
 * Chunk intents on bun:sqlite (chunk-store.ts). One process writes the file, so a claim is an
 * UPDATE of the rows a sub-select picked, inside an IMMEDIATE transaction.
 */
import type { Database } from 'bun:sqlite'
import { rowToChunk, rowToOpenChunks, type ChunkPatch, type ChunkStore } from './chunk-store.ts'

type Row = Record<string, any>

const FOLLOWED = "state NOT IN ('ended', 'abandoned')"

export function createSqliteChunkStore(db: Database): ChunkStore {
  const q = (sql: string) => db.query<Row, any[]>(sql)
  return {
    async createChunk(intent, nowMs, lease) {
      db.transaction(() => {
        q(
          `INSERT INTO batch_chunks (id, batch_id, offering, provider, upstream_model, endpoint,
             model, account_id, state, line_count, fallback_at, next_poll_at, created_at,
             updated_at, lease_owner, lease_until)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'intent', ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          intent.id,
          intent.batchId,
          intent.offering,
          intent.provider,
          intent.upstreamModel,
          intent.endpoint,
          intent.model ?? null,
          intent.accountId ?? null,
          intent.lineNos.length,
          intent.fallbackAtMs,
          nowMs,
          nowMs,
          nowMs,
          lease?.owner ?? null,
          lease?.untilMs ?? null,
        )
        const line = q(
          'INSERT INTO batch_chunk_lines (chunk_id, position, line_no, attempts) VALUES (?, ?, ?, ?)',
        )
        intent.lineNos.forEach((lineNo, index) =>
          line.run(intent.id, index + 1, lineNo, intent.attempts?.[index] ?? 1),
        )
      }).immediate()
    },
    async claimChunks(owner, limit, nowMs, leaseUntilMs) {
      return db
        .transaction(() =>
          q(
            `UPDATE batch_chunks SET lease_owner = ?, lease_until = ?
             WHERE id IN (SELECT id FROM batch_chunks
               WHERE ${FOLLOWED} AND next_poll_at <= ? AND (lease_owner IS NULL OR lease_until <= ?)
               ORDER BY next_poll_at, id LIMIT ?)
             RETURNING *`,
          )
            .all(owner, leaseUntilMs, nowMs, nowMs, limit)
            .map(rowToChunk)
            .sort((a, b) => a.nextPollAt - b.nextPollAt || a.id.localeCompare(b.id)),
        )
        .immediate()
    },
    async updateChunk(owner, id, patch: ChunkPatch, nowMs) {
      const changed = q(
        `UPDATE batch_chunks SET
           state = coalesce(?, state),
           input_file_id = coalesce(?, input_file_id),
           provider_batch_id = coalesce(?, provider_batch_id),
           next_poll_at = coalesce(?, next_poll_at),
           poll_failures = coalesce(?, poll_failures),
           error = CASE WHEN ? THEN ? ELSE error END,
           refused_at = coalesce(?, refused_at),
           updated_at = ?
         WHERE id = ? AND lease_owner = ?`,
      ).run(
        patch.state ?? null,
        patch.inputFileId ?? null,
        patch.providerBatchId ?? null,
        patch.nextPollAt ?? null,
        patch.pollFailures ?? null,
        patch.error !== undefined ? 1 : 0,
        patch.error ?? null,
        patch.refusedAt ?? null,
        nowMs,
        id,
        owner,
      )
      return changed.changes > 0
    },
    async releaseChunk(owner, id) {
      const changed = q(
        'UPDATE batch_chunks SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?',
      ).run(id, owner)
      return changed.changes > 0
    },
    async chunkLines(id) {
      return q(
        'SELECT position, line_no, attempts FROM batch_chunk_lines WHERE chunk_id = ? ORDER BY position',
      )
        .all(id)
        .map((row) => ({
          position: Number(row.position),
          lineNo: Number(row.line_no),
          attempts: Number(row.attempts),
        }))
    },
    async getChunk(id) {
      const row = q('SELECT * FROM batch_chunks WHERE id = ?').get(id)
      return row ? rowToChunk(row) : null
    },
    async chunksOfBatch(batchId) {
      return q('SELECT * FROM batch_chunks WHERE batch_id = ? ORDER BY created_at, id')
        .all(batchId)
        .map(rowToChunk)
    },
    async chunkOfProviderBatch(provider, providerBatchId) {
      const row = q('SELECT id FROM batch_chunks WHERE provider = ? AND provider_batch_id = ?').get(
        provider,
        providerBatchId,
      )
      return row ? String(row.id) : null
    },
    async openChunks(batchIds) {
      if (batchIds.length === 0) return []
      return q(
        `SELECT batch_id, offering, count(*) AS chunks, sum(line_count) AS lines,
           min(fallback_at) AS fallback_at
         FROM batch_chunks
         WHERE batch_id IN (${batchIds.map(() => '?').join(', ')}) AND ${FOLLOWED}
         GROUP BY batch_id, offering`,
      )
        .all(...batchIds)
        .map(rowToOpenChunks)
    },
    async requestCancel(batchId, nowMs) {
      const changed = q(
        `UPDATE batch_chunks SET state = CASE WHEN state = 'submitted' THEN 'cancelling' ELSE state END,
           next_poll_at = ?, updated_at = ?
         WHERE batch_id = ? AND ${FOLLOWED}`,
      ).run(nowMs, nowMs, batchId)
      return changed.changes
    },
  }
}
