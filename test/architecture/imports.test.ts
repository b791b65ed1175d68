/**
 * Data flows one way: HTTP → ingest → store → dispatcher → provider adapter → store → results.
 * These checks keep the layers from reaching back.
 */
import { expect, test } from 'bun:test'
import { Glob } from 'bun'
import { join } from 'node:path'

const ROOT = join(import.meta.dir, '../..')

async function importsOf(pattern: string) {
  const found: { file: string; target: string }[] = []
  for await (const file of new Glob(pattern).scan({ cwd: ROOT })) {
    const text = await Bun.file(join(ROOT, file)).text()
    for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"\n]*?from\s+['"]([^'"]+)['"]/g)) {
      found.push({ file, target: match[1] })
    }
  }
  return found
}

test('providers/ never imports src/: adapters know nothing of the gateway', async () => {
  const offending = (await importsOf('providers/**/*.ts')).filter(({ target }) => target.includes('/src/') || target.startsWith('../src'))
  expect(offending).toEqual([])
})

test('the store does not know HTTP, the dispatcher or the adapters', async () => {
  const offending = (await importsOf('src/store/**/*.ts')).filter(({ target }) =>
    /\/(http|dispatch|upstream)\/|providers\//.test(target),
  )
  expect(offending).toEqual([])
})

test('ingest and money do not reach the store, HTTP or the dispatcher', async () => {
  const offending = [...(await importsOf('src/ingest/**/*.ts')), ...(await importsOf('src/money/**/*.ts'))].filter(
    ({ target }) => /\/(http|dispatch|upstream)\//.test(target) || /store\/(sqlite|postgres)/.test(target),
  )
  expect(offending).toEqual([])
})

test('only src/config.ts reads process.env in the gateway', async () => {
  const readers: string[] = []
  for await (const file of new Glob('src/**/*.ts').scan({ cwd: ROOT })) {
    // The simulator and the user CLI are separate programs with their own settings.
    if (file === 'src/config.ts' || file.startsWith('src/simulator/') || file.startsWith('src/cli/user')) continue
    if ((await Bun.file(join(ROOT, file)).text()).includes('process.env')) readers.push(file)
  }
  expect(readers).toEqual([])
})
