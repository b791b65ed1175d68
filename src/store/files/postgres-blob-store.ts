/**
 * Uploaded files in PostgreSQL, as 1 MiB chunks, so every gateway instance can read what any of
 * them received. Chunks are written as the upload streams in; the file record is only created
 * after the last one, so a half-written file is never visible.
 */
import type postgres from 'postgres'
import { FileTooLarge, type BlobStore } from './blob-store.ts'

const CHUNK = 1 << 20

/** On a pool the store folder opened (src/store/open-store.ts); closing the blob store ends it. */
export function createPostgresBlobStore(sql: postgres.Sql): BlobStore {
  // The table comes from sql/0002_file_chunks.sql, applied when the store opened.
  return {
    async put(id, content, maxBytes) {
      let size = 0
      let seq = 0
      let pending: Uint8Array[] = []
      let pendingBytes = 0
      const flush = async () => {
        if (pendingBytes === 0) return
        const data = Buffer.concat(pending, pendingBytes)
        pending = []
        pendingBytes = 0
        await sql`INSERT INTO file_chunks (file_id, seq, data) VALUES (${id}, ${seq++}, ${data})`
      }
      try {
        for await (const chunk of content) {
          size += chunk.byteLength
          if (size > maxBytes) throw new FileTooLarge(maxBytes)
          pending.push(chunk)
          pendingBytes += chunk.byteLength
          if (pendingBytes >= CHUNK) await flush()
        }
        await flush()
      } catch (error) {
        await sql`DELETE FROM file_chunks WHERE file_id = ${id}`.catch(() => {})
        throw error
      }
      return size
    },
    read(id) {
      let seq = 0
      return new ReadableStream<Uint8Array>({
        async pull(controller) {
          const [row] =
            await sql`SELECT data FROM file_chunks WHERE file_id = ${id} AND seq = ${seq}`
          if (!row) return controller.close()
          seq++
          controller.enqueue(new Uint8Array(row.data as Buffer))
        },
      })
    },
    async readAll(id) {
      const rows = await sql`SELECT data FROM file_chunks WHERE file_id = ${id} ORDER BY seq`
      return new Uint8Array(Buffer.concat(rows.map((row) => row.data as Buffer)))
    },
    async delete(id) {
      await sql`DELETE FROM file_chunks WHERE file_id = ${id}`
    },
    async listIds(after, limit) {
      // Every stored upload has its chunk 0 (an empty one has none, and nothing to delete).
      const rows = await sql`
        SELECT file_id FROM file_chunks WHERE seq = 0 AND file_id > ${after ?? ''}
        ORDER BY file_id LIMIT ${limit}`
      return rows.map((row) => row.file_id as string)
    },
    async close() {
      await sql.end({ timeout: 5 })
    },
  }
}
