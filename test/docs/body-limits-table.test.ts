/**
 * The body limits table of docs/operations.md names every route that takes a body: the route
 * table's operations with a request body (src/http/openapi/) are each in a row, by their path, a
 * `…` prefix of it, or a row's "also under `/openai`". A route missing there reads as one that
 * takes no body ("whatever is sent is discarded unread"), which it is not.
 */
import { expect, test } from 'bun:test'
import { OPERATIONS } from '../../src/http/openapi/build-openapi.ts'
import { readDoc } from '../helpers/doc-blocks.ts'

/** The table's rows: each row's paths (the code spans, methods dropped) and whether it has a prefix. */
function tableRows(): { paths: string[]; prefixes: string[] }[] {
  const section = readDoc('docs/operations.md')
    .split(/^## Body limits$/m)[1]!
    .split(/^## /m)[0]!
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const cell = line.split('|')[1]!
      const spans = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/^[A-Z]+ /, ''))
      const also = /also under `\/openai`/.test(cell)
      const paths = spans.filter((s) => s.startsWith('/') && !s.endsWith('…'))
      return {
        paths: also ? [...paths, ...paths.map((p) => `/openai${p}`)] : paths,
        prefixes: spans.filter((s) => s.endsWith('…')).map((s) => s.slice(0, -1)),
      }
    })
}

test('every route that takes a body has its limit in the body limits table of docs/operations.md', () => {
  const rows = tableRows()
  const listed = (path: string) =>
    rows.some((r) => r.paths.includes(path) || r.prefixes.some((p) => path.startsWith(p)))
  const withBody = Object.entries(OPERATIONS)
    .filter(([, operation]) => operation.body)
    .map(([key]) => key)
  expect(withBody.length).toBeGreaterThan(10)
  expect(withBody.filter((key) => !listed(key.split(' ')[1]!))).toEqual([])
})
