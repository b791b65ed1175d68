/**
 * Every request body is read through src/ingest/read-body.ts, with its route's limit
 * (src/http/body-limits.ts): a handler that read one itself would read it unbounded, since Bun's
 * own cap is lifted (gateway.ts). The multipart upload streams the body to busboy instead; its
 * file part is limited as it is stored.
 */
import { expect, test } from 'bun:test'
import { Glob } from 'bun'
import { join } from 'node:path'

const ROOT = join(import.meta.dir, '../..')
const STREAMS_ITSELF = new Set(['src/http/openai/read-multipart-upload.ts'])

test('no route reads a request body except through read-body.ts, nor lets Elysia parse one', async () => {
  const offending: string[] = []
  for await (const file of new Glob('src/{http,auth,admission}/**/*.ts').scan({ cwd: ROOT })) {
    const text = await Bun.file(join(ROOT, file)).text()
    const reads = [
      ...(text.match(
        /\brequest\.(json|formData|text|arrayBuffer|bytes|blob)\(\)|\brequest\.body\b/g,
      ) ?? []),
      // A handler taking Elysia's `body` makes Elysia read and parse it before any hook runs.
      ...(text.match(/\(\s*\{[^}]*\bbody\b[^}]*\}\s*\)\s*=>/g) ?? []),
    ]
    if (reads.length > 0 && !STREAMS_ITSELF.has(file))
      offending.push(`${file}: ${reads.join(', ')}`)
  }
  expect(offending).toEqual([])
})
