/**
 * Chunk intents on PostgreSQL (chunk-store.ts). A claim is one UPDATE of the rows a `SELECT …
 * FOR UPDATE SKIP LOCKED` picked, as for lines and webhook deliveries: instances claiming at
 * once each get other chunks, and one whose lease is live is never taken.
 */
import type postgres from 'postgres'
import { rowToChunk, rowToOpenChunks, type ChunkPatch, type ChunkStore } from './chunk-store.ts'

type Sql = postgres.Sql

export function createPostgresChunkStore(sql: Sql): ChunkStore {
  return {
    async createChunk(intent, nowMs, lease) {
      await sql.begin(async (tx) => {
        await tx`
          INSERT INTO batch_chunks (id, batch_id, offering, provider, upstream_model, endpoint,
            model, account_id, state, line_count, fallback_at, next_poll_at, created_at,
            updated_at, lease_owner, lease_until)
          VALUES (${intent.id}, ${intent.batchId}, ${intent.offering}, ${intent.provider},
            ${intent.upstreamModel}, ${intent.endpoint}, ${intent.model ?? null},
            ${intent.accountId ?? null}, 'intent', ${intent.lineNos.length}, ${intent.fallbackAtMs},
            ${nowMs}, ${nowMs}, ${nowMs}, ${lease?.owner ?? null}, ${lease?.untilMs ?? null})`
        const rows = intent.lineNos.map((lineNo, index) => ({
          chunk_id: intent.id,
          position: index + 1,
          line_no: lineNo,
          attempts: intent.attempts?.[index] ?? 1,
        }))
        // Within PostgreSQL's 65,535 parameters a statement: 3 a row.
        for (let start = 0; start < rows.length; start += 10_000)
          await tx`INSERT INTO batch_chunk_lines ${tx(rows.slice(start, start + 10_000), 'chunk_id', 'position', 'line_no', 'attempts')}`
      })
    },
    async claimChunks(owner, limit, nowMs, leaseUntilMs) {
      const rows = await sql`
        UPDATE batch_chunks SET lease_owner = ${owner}, lease_until = ${leaseUntilMs}
        WHERE id IN (
          SELECT id FROM batch_chunks
          WHERE state NOT IN ('ended', 'abandoned') AND next_poll_at <= ${nowMs}
            AND (lease_owner IS NULL OR lease_until <= ${nowMs})
          ORDER BY next_poll_at, id LIMIT ${limit}
          FOR UPDATE SKIP LOCKED)
        RETURNING *`
      return rows
        .map(rowToChunk)
        .sort((a, b) => a.nextPollAt - b.nextPollAt || a.id.localeCompare(b.id))
    },
    async updateChunk(owner, id, patch: ChunkPatch, nowMs) {
      const rows = await sql`
        UPDATE batch_chunks SET
          state = coalesce(${patch.state ?? null}::text, state),
          input_file_id = coalesce(${patch.inputFileId ?? null}::text, input_file_id),
          provider_batch_id = coalesce(${patch.providerBatchId ?? null}::text, provider_batch_id),
          next_poll_at = coalesce(${patch.nextPollAt ?? null}::bigint, next_poll_at),
          poll_failures = coalesce(${patch.pollFailures ?? null}::int, poll_failures),
          error = CASE WHEN ${patch.error !== undefined} THEN ${patch.error ?? null}::text ELSE error END,
          refused_at = coalesce(${patch.refusedAt ?? null}::bigint, refused_at),
          updated_at = ${nowMs}
        WHERE id = ${id} AND lease_owner = ${owner}
        RETURNING id`
      return rows.length > 0
    },
    async releaseChunk(owner, id) {
      const rows = await sql`
        UPDATE batch_chunks SET lease_owner = NULL, lease_until = NULL
        WHERE id = ${id} AND lease_owner = ${owner} RETURNING id`
      return rows.length > 0
    },
    async chunkLines(id) {
      const rows = await sql`
        SELECT position, line_no, attempts FROM batch_chunk_lines WHERE chunk_id = ${id} ORDER BY position`
      return rows.map((row) => ({
        position: Number(row.position),
        lineNo: Number(row.line_no),
        attempts: Number(row.attempts),
      }))
    },
    async getChunk(id) {
      const [row] = await sql`SELECT * FROM batch_chunks WHERE id = ${id}`
      return row ? rowToChunk(row) : null
    },
    async chunksOfBatch(batchId) {
      const rows = await sql`
        SELECT * FROM batch_chunks WHERE batch_id = ${batchId} ORDER BY created_at, id`
      return rows.map(rowToChunk)
    },
    async chunkOfProviderBatch(provider, providerBatchId) {
      const [row] = await sql`
        SELECT id FROM batch_chunks
        WHERE provider = ${provider} AND provider_batch_id = ${providerBatchId}`
      return row ? String(row.id) : null
    },
    async openChunks(batchIds) {
      if (batchIds.length === 0) return []
      const rows = await sql`
        SELECT batch_id, offering, count(*) AS chunks, sum(line_count) AS lines,
          min(fallback_at) AS fallback_at
        FROM batch_chunks
        WHERE batch_id IN ${sql(batchIds as string[])} AND state NOT IN ('ended', 'abandoned')
        GROUP BY batch_id, offering`
      return rows.map(rowToOpenChunks)
    },
    async requestCancel(batchId, nowMs) {
      const rows = await sql`
        UPDATE batch_chunks
        SET state = CASE WHEN state = 'submitted' THEN 'cancelling' ELSE state END,
          next_poll_at = ${nowMs}, updated_at = ${nowMs}
        WHERE batch_id = ${batchId} AND state NOT IN ('ended', 'abandoned')
        RETURNING id`
      return rows.length
    },
  }
}
