/**
 * Thin routes (issue 24 item 2): a route group authenticates in one place, the caller macro
 * (src/http/caller-macro.ts) or the dashboard's session macro, and hands the handler its caller;
 * no handler calls the authenticator or casts `set.headers` itself. The live call (live.ts)
 * reads and authenticates its own body for now and is counted apart.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { sourceFiles } from './function-size.ts'

const ROOT = join(import.meta.dir, '../..')
const LIVE = 'src/http/live.ts'

/** `file: count` of every place a pattern occurs in src/http, the live call apart. */
function sitesOf(pattern: RegExp): Record<string, number> {
  const sites: Record<string, number> = {}
  for (const path of sourceFiles(ROOT, ['src/http'])) {
    const file = relative(ROOT, path)
    if (file === LIVE) continue
    const count = readFileSync(path, 'utf8').match(pattern)?.length ?? 0
    if (count > 0) sites[file] = count
  }
  return sites
}

describe('authentication in the routes', () => {
  test('the authenticator is called by the two macros and the sign-in form only', () => {
    expect(sitesOf(/\.(authenticate|authorize)\(/g)).toEqual({
      'src/http/caller-macro.ts': 1,
      'src/http/dashboard/signed-in.ts': 1,
      // Signing in reads a key from a form, not a header: the one key the dashboard sees.
      'src/http/dashboard/dashboard-routes.ts': 1,
    })
  })

  test('set.headers is cast once, in responseHeaders, and no route defines its own headersOf', () => {
    expect(sitesOf(/set\.headers as /g)).toEqual({ 'src/http/caller-macro.ts': 1 })
    expect(sitesOf(/headersOf\s*=\s*\(set/g)).toEqual({})
  })
})
