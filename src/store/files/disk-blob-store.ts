/** Uploaded files as plain files under `<data dir>/files`, written as they stream in. */
import { mkdirSync } from 'node:fs'
import { readdir, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { FileTooLarge, type BlobStore } from './blob-store.ts'

const FLUSH_BYTES = 1 << 20

export function createDiskBlobStore(dataDir: string): BlobStore {
  const dir = join(dataDir, 'files')
  mkdirSync(dir, { recursive: true })
  const path = (id: string) => join(dir, id.replace(/[^A-Za-z0-9_-]/g, '_'))
  const PARTIAL = '.partial'
  return {
    async put(id, content, maxBytes) {
      const target = path(id)
      const partial = target + PARTIAL
      const writer = Bun.file(partial).writer({ highWaterMark: 1 << 20 })
      let size = 0
      let unflushed = 0
      try {
        for await (const chunk of content) {
          size += chunk.byteLength
          if (size > maxBytes) throw new FileTooLarge(maxBytes)
          writer.write(chunk)
          // Waiting for the disk once per MiB, not once per network chunk (often 16–64 KiB),
          // keeps reading ahead of a fast sender while still bounding what is buffered.
          unflushed += chunk.byteLength
          if (unflushed >= FLUSH_BYTES) {
            unflushed = 0
            await writer.flush()
          }
        }
        await writer.end()
      } catch (error) {
        await Promise.resolve(writer.end()).catch(() => {})
        await rm(partial, { force: true })
        throw error
      }
      // Renamed only once whole: a crash mid-upload never leaves a truncated file behind a record.
      await rename(partial, target)
      return size
    },
    read: (id) => Bun.file(path(id)).stream(),
    readAll: (id) => Bun.file(path(id)).bytes(),
    async delete(id) {
      await rm(path(id), { force: true })
      await rm(path(id) + PARTIAL, { force: true })
    },
    async listIds(after, limit) {
      // Ids are `file-` + hex (newId), so a name is its id, with or without the `.partial` suffix.
      const names = await readdir(dir)
      const ids = [
        ...new Set(
          names.map((name) => (name.endsWith(PARTIAL) ? name.slice(0, -PARTIAL.length) : name)),
        ),
      ]
      return ids
        .filter((id) => after === null || id > after)
        .sort()
        .slice(0, limit)
    },
    async close() {},
  }
}
