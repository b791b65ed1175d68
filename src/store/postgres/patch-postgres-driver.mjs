/**
 * `postinstall`: fixes a crash of the `postgres` driver (porsager/postgres 3.4.9, the latest
 * release) when the server drops connections, e.g. a PostgreSQL restart under load. Plain Node,
 * no dependencies, so it also runs in `npm ci --omit=dev`; idempotent.
 *
 * The bug (porsager/postgres#1066, #1154, #1208; fix proposed in #1168, #1176, #1209, none merged):
 * a write smaller than 1 KiB is flushed by `setImmediate(nextWrite)`. When the socket closes first
 * (a transaction's ROLLBACK written to a connection the server just terminated), `nextWrite` runs
 * with `socket === null` and throws from the immediate — uncatchable, the process dies. Measured
 * here: 2 gateway processes, PostgreSQL restarted mid-batch, both died. And by reading the code:
 * `closed()` cancels the immediate but keeps `chunk` and the stale timer, so the next connection
 * appends its startup packet to the dead session's bytes and does not schedule a flush (the
 * server logged "invalid length of startup packet" after such a restart).
 *
 * The fix, as in #1209: with no socket, drop the buffered bytes and reject the connection's
 * queries with CONNECTION_CLOSED (so no caller waits forever); `closed()` forgets the buffer.
 * Remove this script when a release carries the fix.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  '..',
  'node_modules',
  'postgres',
)
const MARKER = '/* multigrid: nextWrite guard */'

const edits = [
  {
    from: '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)',
    to:
      '  function nextWrite(fn) {\n' +
      `    ${MARKER}\n` +
      '    if (!socket) {\n' +
      '      chunk = nextWriteTimer = null\n' +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n" +
      '      return false\n' +
      '    }\n' +
      '    const x = socket.write(chunk, fn)',
  },
  {
    from: '    incomings = null\n    clearImmediate(nextWriteTimer)\n    socket.removeListener',
    to:
      '    incomings = null\n    clearImmediate(nextWriteTimer)\n' +
      '    chunk = nextWriteTimer = null\n    socket.removeListener',
  },
]

if (!existsSync(root)) process.exit(0) // not installed (yet): nothing to patch
const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version
let patched = 0
for (const flavour of ['src', 'cjs/src', 'cf/src']) {
  const path = join(root, flavour, 'connection.js')
  if (!existsSync(path)) continue
  let text = readFileSync(path, 'utf8')
  if (text.includes(MARKER)) continue
  const missing = edits.filter((edit) => !text.includes(edit.from))
  if (missing.length > 0) {
    console.warn(
      `multigrid: postgres ${version} ${flavour}/connection.js does not look like 3.4.9; not ` +
        'patched — check whether this release fixes porsager/postgres#1208, then drop ' +
        'src/store/postgres/patch-postgres-driver.mjs (the postinstall script)',
    )
    continue
  }
  for (const edit of edits) text = text.replace(edit.from, edit.to)
  writeFileSync(path, text)
  patched++
}
if (patched > 0) {
  console.log(`multigrid: patched postgres ${version} (porsager/postgres#1208)`)
}
