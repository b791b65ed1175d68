import { createCatalog } from '../src/catalog/catalog.ts'
import { loadConfig } from '../src/config.ts'
import { checkLines } from '../src/ingest/validate-batch-file.ts'
import { readJsonlLines } from '../src/ingest/read-jsonl-lines.ts'
import { benchCatalog, standardFile, BENCH_MODEL } from './lib.ts'
const config = loadConfig({ MULTIGRID_CONFIG: benchCatalog('http://127.0.0.1:9/v1', 64) })
const catalog = createCatalog(config.catalog, config.providerKeys)
const all = (await Bun.file(await standardFile(BENCH_MODEL)).text()).split('\n').filter(Boolean)
const n = Number(process.argv[2] ?? 10000)
const bytes = new TextEncoder().encode(all.slice(0, n).join('\n') + '\n')
const LIMITS = { maxLines: 50_000, maxCustomIdLength: 128 }
for (let r = 0; r < 8; r++) {
  let t = performance.now()
  const c = checkLines(bytes, catalog, LIMITS)
  const check = performance.now() - t
  t = performance.now()
  let k = 0
  for (const line of readJsonlLines(bytes)) { JSON.parse(line.text!); k++ }
  const parse = performance.now() - t
  console.log(`checkLines ${check.toFixed(1)} ms (${((check * 1000) / n).toFixed(2)} µs/line, ${c.issues.length} issues)  read+JSON.parse ${parse.toFixed(1)} ms (${((parse * 1000) / n).toFixed(2)} µs/line)`)
}
