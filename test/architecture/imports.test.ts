/**
 * Data flows one way: HTTP → ingest → store → dispatcher → provider adapter → store → results.
 * These checks keep the layers from reaching back, from the real import graph (Bun's transpiler,
 * type-only imports included): a file may import only from its own layer or lower ones.
 */
import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import {
  importCycles,
  importGraph,
  layerViolations,
  readTree,
  unplaced,
  type Layer,
} from './import-graph.ts'

const ROOT = join(import.meta.dir, '../..')

/**
 * The layer order, lowest first, and what belongs to each. A file not listed by its own path is
 * placed by its folder. Placements that do not follow from the folder's name say why.
 */
const LAYERS: Layer[] = [
  { name: 'providers', paths: ['providers/'] },
  {
    name: 'domain',
    paths: [
      'src/domain.ts',
      'src/types.d.ts',
      'src/errors.ts', // the error every layer throws; imports nothing
      'src/excerpt.ts', // quoting a piece of the input in a message; imports nothing
      'src/telemetry/', // logger and tracer: every layer reports
      'src/threads/', // worker-thread plumbing: knows nothing of the gateway
      'src/memory/', // allocator and GC settings: knows nothing of the gateway
    ],
  },
  // Decimal types only: money imports nothing above it (issue 24 item 3).
  { name: 'money', paths: ['src/money/'] },
  { name: 'schemas', paths: ['src/schemas/'] },
  {
    name: 'catalog',
    paths: [
      'src/catalog/', // offerings and prices, read by pricing at ingest and by dispatch
      'src/config.ts', // the parsed settings every layer is given; reads only the catalog file's schema
    ],
  },
  // What a line costs and may cost: the ceiling, usage pricing, billing on a bound (docs/money-and-limits.md, docs/pricing.md).
  { name: 'pricing', paths: ['src/pricing/'] },
  {
    name: 'store',
    paths: [
      'src/store/', // the bytes of uploaded files too (src/store/files/), beside their rows
      'src/coordination/nudges.ts', // a NOTIFY on the store's own schema (issue 15 item 4 moves it into the store)
    ],
  },
  { name: 'ingest', paths: ['src/ingest/'] },
  {
    name: 'admission',
    paths: [
      'src/admission/',
      'src/auth/', // who is asking, checked before anything is admitted
      'src/limits/', // per-key request rates, checked with the key
      'src/accounts/', // accounts, keys and credit: what admission checks against
    ],
  },
  {
    name: 'upstream',
    paths: [
      'src/upstream/',
      'src/coordination/', // the instance's one Redis connection, for the fleet-wide provider gates (and the rate limiter, given it by the gateway)
    ],
  },
  // A live call: validated, held, sent over the upstreams, settled (routes only read and render).
  { name: 'live', paths: ['src/live/'] },
  {
    name: 'dispatch',
    paths: [
      'src/dispatch/',
      'src/retention/', // a periodic sweep over the store, run beside the dispatcher
      'src/webhooks/', // the outbox's deliveries: a periodic task over the store, beside the janitor
      'src/telemetry/observe-lines.ts', // what the dispatcher reports per line (the store's LineOutcome)
    ],
  },
  { name: 'http', paths: ['src/http/'] },
  {
    name: 'gateway',
    paths: [
      'src/gateway.ts',
      'src/gateway/', // the composition root's steps: stores, upstreams, dispatch, app, loops, stop
      'src/main.ts',
      'src/cli/', // the admin and user CLIs: programs of their own, composed like the gateway
      'src/simulator/', // the test upstream: a program of its own
    ],
  },
]

/**
 * Imports that run up the order today, each with the issue item that removes it. Any other
 * violation fails the test; so does an entry here that no longer happens (delete it then).
 */
const KNOWN_VIOLATIONS: { from: string; to: string; removedBy: string }[] = []

/**
 * Inside the store, lowest first (issue 24 item 1): the connection a role is given (with each
 * dialect's connecting and migrations), the roles (each a folder with its interface, both
 * dialects, its rows and its contract suite in test/store/<role>.test.ts), then the composition:
 * store.ts's types, the store classes that set the roles on themselves, and openStore. A role
 * imports the connection and the roles below it, never a store class nor store.ts.
 */
const STORE_LAYERS: Layer[] = [
  {
    name: 'connection',
    paths: [
      'src/store/connection.ts',
      'src/store/read-migrations.ts', // the migration files, read for either dialect
      'src/store/store-channel.ts', // the nudge channel's interface
      'src/store/sqlite/', // opening the database file, its migrations and checkpoints
      'src/store/postgres/', // connecting, migrations, the NOTIFY channel, storable text
    ],
  },
  { name: 'credit', paths: ['src/store/credit/'] },
  // An account's view shows what its live leases hold (credit's sqlite-leases.ts).
  { name: 'accounts', paths: ['src/store/accounts/'] },
  { name: 'files', paths: ['src/store/files/'] },
  { name: 'fine-tunes', paths: ['src/store/fine-tunes/'] },
  { name: 'webhooks', paths: ['src/store/webhooks/'] },
  // The janitor's view names the files' and the accounts' expiries.
  { name: 'retention', paths: ['src/store/retention/'] },
  { name: 'usage', paths: ['src/store/usage/'] },
  // Ending a batch enqueues its webhooks' deliveries; the progress shards are the dispatcher's.
  { name: 'dispatch', paths: ['src/store/dispatch/'] },
  // A batch is read with the dispatcher's progress shards, and a cancel ends it the dispatcher's way.
  { name: 'batches', paths: ['src/store/batches/'] },
  // The batch lanes' chunks add their lines to a batch's provider shares.
  { name: 'batch-chunks', paths: ['src/store/batch-chunks/'] },
  {
    name: 'composition',
    paths: [
      'src/store/', // store.ts (the roles' types as one), open-store.ts
      'src/store/sqlite/sqlite-store.ts',
      'src/store/postgres/postgres-store.ts',
    ],
  },
]

/** The role folders, each of which must have its own contract suite. */
const STORE_ROLES = [
  'accounts',
  'credit',
  'files',
  'fine-tunes',
  'webhooks',
  'retention',
  'usage',
  'dispatch',
  'batches',
]

const tree = await readTree(ROOT, ['src/**/*.ts', 'providers/**/*.ts'])
const edges = importGraph(tree)
const key = ({ from, to }: { from: string; to: string }) => `${from} → ${to}`

describe('layers', () => {
  test('the transpiler sees the tree: hundreds of imports, the multi-line ones among them', () => {
    expect(Object.keys(tree).length).toBeGreaterThan(100)
    expect(edges.length).toBeGreaterThan(200)
    const multiLine = Object.entries(tree).filter(([, code]) =>
      /\bimport\s*(?:type\s*)?\{[^}]*\n[^}]*\}\s*from/.test(code),
    )
    expect(multiLine.length).toBeGreaterThan(0)
    for (const [file] of multiLine) expect(edges.some((edge) => edge.from === file)).toBe(true)
  })

  test('every source file has a layer', () => {
    expect(unplaced(tree, LAYERS)).toEqual([])
  })

  test('no file imports from a higher layer, except the known ones listed with the item that removes them', () => {
    const known = new Set(KNOWN_VIOLATIONS.map(key))
    const fresh = layerViolations(edges, LAYERS).filter((violation) => !known.has(key(violation)))
    expect(fresh.map((violation) => violation.why)).toEqual([])
  })

  test('each known violation still happens (else delete it from KNOWN_VIOLATIONS)', () => {
    const happening = new Set(layerViolations(edges, LAYERS).map(key))
    expect(KNOWN_VIOLATIONS.map(key).filter((entry) => !happening.has(entry))).toEqual([])
  })

  test('providers/ never imports src/: adapters know nothing of the gateway', () => {
    expect(
      edges
        .filter((edge) => edge.from.startsWith('providers/') && !edge.to.startsWith('providers/'))
        .map(key),
    ).toEqual([])
  })

  test('src/money/ imports nothing outside itself: the decimal leaf, pricing lives in src/pricing/', () => {
    expect(
      edges
        .filter((edge) => edge.from.startsWith('src/money/') && !edge.to.startsWith('src/money/'))
        .map(key),
    ).toEqual([])
  })

  test('only the store opens its implementations: everyone else goes through store.ts and open-store.ts', () => {
    const reaching = edges.filter(
      (edge) =>
        /^src\/store\/(sqlite|postgres)\//.test(edge.to) && !edge.from.startsWith('src/store/'),
    )
    expect(reaching.map(key)).toEqual([])
  })

  test('no import cycle, type-only imports included', () => {
    expect(importCycles(edges)).toEqual([])
  })
})

describe('inside the store', () => {
  const inner = edges.filter(
    (edge) => edge.from.startsWith('src/store/') && edge.to.startsWith('src/store/'),
  )

  test('every store file has an inner layer', () => {
    const storeFiles = Object.fromEntries(
      Object.entries(tree).filter(([file]) => file.startsWith('src/store/')),
    )
    expect(Object.keys(storeFiles).length).toBeGreaterThan(50)
    expect(unplaced(storeFiles, STORE_LAYERS)).toEqual([])
  })

  test('no store file imports from a higher inner layer: roles see the connection, not a store class', () => {
    expect(layerViolations(inner, STORE_LAYERS).map((violation) => violation.why)).toEqual([])
  })

  test('each role folder holds its interface and both dialects, and has a contract suite of its own', async () => {
    for (const role of STORE_ROLES) {
      const files = Object.keys(tree).filter((file) => file.startsWith(`src/store/${role}/`))
      expect(files.some((file) => file.endsWith('-store.ts'))).toBe(true)
      expect(files.some((file) => file.split('/').at(-1)!.startsWith('sqlite-'))).toBe(true)
      expect(files.some((file) => file.split('/').at(-1)!.startsWith('postgres-'))).toBe(true)
      expect(await Bun.file(join(ROOT, `test/store/${role}.test.ts`)).exists()).toBe(true)
    }
  })

  test('the checker sees a role reaching up to a store class', () => {
    const wrong = {
      'src/store/connection.ts': `export type Row = Record<string, unknown>\n`,
      'src/store/webhooks/sqlite-webhooks.ts': `import type { Row } from '../connection.ts'\nimport { createSqliteStore } from '../sqlite/sqlite-store.ts'\nexport const x = (row: Row) => [row, createSqliteStore]\n`,
      'src/store/sqlite/sqlite-store.ts': `export const createSqliteStore = () => null\n`,
    }
    expect(
      layerViolations(importGraph(wrong), STORE_LAYERS).map((violation) => violation.why),
    ).toEqual([
      'src/store/webhooks/sqlite-webhooks.ts (webhooks) → src/store/sqlite/sqlite-store.ts (composition)',
    ])
  })
})

describe('the checker catches what it is for', () => {
  // A made-up tree with the real layer map, so these fail if the checker stops seeing imports.
  const fake = {
    'providers/types.ts': `export interface Outcome { ok: boolean }\n`,
    'src/store/store.ts': `import type { Outcome } from '../../providers/types.ts'\nexport type Row = Outcome\n`,
    'src/dispatch/dispatcher.ts': `import type { Row } from '../store/store.ts'\nexport const run = (row: Row) => row\n`,
    'src/http/app.ts': `import { run } from '../dispatch/dispatcher.ts'\nexport const app = run\n`,
  }

  test('the fake tree, as written, is clean', () => {
    const fakeEdges = importGraph(fake)
    expect(fakeEdges).toHaveLength(3)
    expect(layerViolations(fakeEdges, LAYERS)).toEqual([])
    expect(importCycles(fakeEdges)).toEqual([])
  })

  test('an import up the layers, spread over several lines, is reported', () => {
    const wrong = {
      ...fake,
      'src/store/store.ts': `import {\n  run,\n} from '../dispatch/dispatcher.ts'\nexport type Row = ReturnType<typeof run>\n`,
    }
    expect(layerViolations(importGraph(wrong), LAYERS).map((violation) => violation.why)).toEqual([
      'src/store/store.ts (store) → src/dispatch/dispatcher.ts (dispatch)',
    ])
  })

  test('a type-only import up the layers is reported, in each of its spellings', () => {
    for (const statement of [
      `import type { app } from '../src/http/app.ts'`,
      `import type {\n  app,\n} from '../src/http/app.ts'`,
      `import { type app } from '../src/http/app.ts'`,
      `export type { app } from '../src/http/app.ts'`,
    ]) {
      const wrong = {
        ...fake,
        'providers/types.ts': `${statement}\nexport interface Outcome { ok: boolean }\n`,
      }
      const found = layerViolations(importGraph(wrong), LAYERS)
      expect(found.map((violation) => violation.why)).toEqual([
        'providers/types.ts (providers) → src/http/app.ts (http)',
      ])
    }
  })

  test('a dynamic import up the layers, and an import of test code, are reported', () => {
    const wrong = {
      ...fake,
      'src/store/store.ts': `export const later = () => import('../http/app.ts')\nimport '../../test/helpers/wait.ts'\n`,
    }
    expect(layerViolations(importGraph(wrong), LAYERS).map((violation) => violation.why)).toEqual([
      'src/store/store.ts (store) → src/http/app.ts (http)',
      'src/store/store.ts (store) → test/helpers/wait.ts (no layer)',
    ])
  })

  test('a file in no layer is reported', () => {
    expect(unplaced({ ...fake, 'src/planner/plan.ts': '' }, LAYERS)).toEqual([
      'src/planner/plan.ts',
    ])
  })

  test('a cycle is reported, even within one layer', () => {
    const circular = {
      ...fake,
      'src/http/a.ts': `import { b } from './b.ts'\nexport const a = () => b\n`,
      'src/http/b.ts': `import type { a } from './a.ts'\nexport const b: typeof a | null = null\n`,
    }
    expect(importCycles(importGraph(circular))).toEqual([['src/http/a.ts', 'src/http/b.ts']])
  })
})

test('only src/config.ts reads process.env in the gateway', () => {
  const readers: string[] = []
  for (const [file, code] of Object.entries(tree)) {
    if (!file.startsWith('src/')) continue
    // The simulator, the user CLI and the demo (its two ports, as npm start and the walk-through
    // take them) are separate programs with their own settings.
    if (
      file === 'src/config.ts' ||
      file.startsWith('src/simulator/') ||
      file.startsWith('src/cli/user') ||
      file === 'src/cli/demo.ts'
    )
      continue
    if (code.includes('process.env')) readers.push(file)
  }
  expect(readers).toEqual([])
})
