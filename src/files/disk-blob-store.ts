/** Uploaded files as plain files under `<data dir>/files`, written as they stream in. */
import { mkdirSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { FileTooLarge, type BlobStore } from './blob-store.ts'

export function createDiskBlobStore(dataDir: string): BlobStore {
  const dir = join(dataDir, 'files')
  mkdirSync(dir, { recursive: true })
  const path = (id: string) => join(dir, id.replace(/[^A-Za-z0-9_-]/g, '_'))
  return {
    async put(id, content, maxBytes) {
      const target = path(id)
      const partial = `${target}.partial`
      const writer = Bun.file(partial).writer({ highWaterMark: 1 << 20 })
      let size = 0
      try {
        for await (const chunk of content) {
          size += chunk.byteLength
          if (size > maxBytes) throw new FileTooLarge(maxBytes)
          writer.write(chunk)
          await writer.flush()
        }
        await writer.end()
      } catch (error) {
        await Promise.resolve(writer.end()).catch(() => {})
        await rm(partial, { force: true })
        throw error
      }
      // Renamed only once whole: a crash mid-upload never leaves a truncated file behind a record.
      await Bun.write(target, Bun.file(partial))
      await rm(partial, { force: true })
      return size
    },
    read: (id) => Bun.file(path(id)).stream(),
    readAll: (id) => Bun.file(path(id)).bytes(),
    delete: (id) => rm(path(id), { force: true }),
    async close() {},
  }
}
