/**
 * The README stays a newcomer's first page (short, pointing into docs/), and the links of the
 * README and the reference lead somewhere: to a file that exists and, with an anchor, to a
 * heading in it. Every page of docs/ is listed in its index.
 */
import { expect, test } from 'bun:test'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { ROOT, readDoc } from '../helpers/doc-blocks.ts'

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replaceAll(' ', '-')

/** The text outside fenced blocks. */
const prose = (markdown: string) => markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '')

function anchors(path: string): Set<string> {
  const headings = prose(readDoc(path)).match(/^#+ .*$/gm) ?? []
  return new Set(headings.map((h) => slug(h.replace(/^#+ /, ''))))
}

/** Relative links of a page, as [path from the root, anchor]. */
function links(path: string): [string, string][] {
  return [...prose(readDoc(path)).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((l) => !/^[a-z]+:/.test(l))
    .map((l) => {
      const [file, anchor = ''] = l.split('#')
      return [file ? normalize(join(dirname(path), file)) : path, anchor]
    })
}

function docPages(dir = 'docs'): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(join(ROOT, path)).isDirectory()) return docPages(path)
    return name.endsWith('.md') ? [path] : []
  })
}

test('the README is short and points into docs/', () => {
  const readme = readDoc('README.md')
  expect(readme.split('\n').length).toBeLessThan(400)
  const targets = links('README.md').map(([file]) => file)
  for (const page of [
    'docs/README.md',
    'docs/native-api.md',
    'docs/configuration.md',
    'docs/clients/curl.md',
  ])
    expect(targets).toContain(page)
})

test('every link of the README leads to a file, and every anchor to one of its headings', () => {
  for (const [file, anchor] of links('README.md')) {
    expect(existsSync(join(ROOT, file)), file).toBe(true)
    if (anchor && !statSync(join(ROOT, file)).isDirectory())
      expect(anchors(file).has(anchor), `${file}#${anchor}`).toBe(true)
  }
})

test('every anchor the reference links to is a heading of its page', () => {
  for (const page of docPages()) {
    for (const [file, anchor] of links(page)) {
      if (!anchor || !existsSync(join(ROOT, file)) || statSync(join(ROOT, file)).isDirectory())
        continue
      expect(anchors(file).has(anchor), `${page} → ${file}#${anchor}`).toBe(true)
    }
  }
})

test('every page of docs/ is in its index', () => {
  const indexed = new Set(links('docs/README.md').map(([file]) => file))
  for (const page of docPages()) {
    if (page === 'docs/README.md') continue
    expect(indexed.has(page), `${relative('docs', page)} missing from docs/README.md`).toBe(true)
  }
})
