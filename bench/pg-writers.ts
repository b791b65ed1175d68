/**
 * PostgreSQL's CPU per line when one batch's lines are claimed and recorded by 1, 2 or 3
 * connections (instances), with no gateway around it: the claim (`FOR UPDATE SKIP LOCKED` in
 * line order, then the update to `running`) and the record (the update to `succeeded` with a
 * response) in the shapes of src/store/dispatch/, on a table with the indexes of `lines`. Each
 * writer records the group it claimed two claims before, as answers come back later. Reads the
 * backends' CPU from /proc (the server must be on this machine). docs/scale.md reads it.
 *
 *   bun bench/pg-writers.ts [--lines 20000] [--writers 1,2,3] [--rounds 3] [--serial] [--stripes]
 *
 * --serial: the writers take turns, one statement at a time across all of them, so that what is
 * left is the cost of the work moving between backends, without any two running at once.
 * --stripes: writer i of n claims from line i/n of the batch on, each after the last line it
 * took, so that no two touch the same lines' pages (then from the start, for what is left).
 * Every loop is bounded by the lines; the server is BENCH_DATABASE_URL (127.0.0.1).
 */
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { BENCH_DATABASE_URL, cpuMs, median } from './lib.ts'

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '20000' },
    writers: { type: 'string', default: '1,2,3' },
    rounds: { type: 'string', default: '3' },
    serial: { type: 'boolean', default: false },
    stripes: { type: 'boolean', default: false },
  },
})
const LINES = Number(values.lines)
const CLAIM = 64
const SCHEMA = `pgw_${Math.random().toString(36).slice(2, 10)}`
const INPUT = JSON.stringify({
  custom_id: 'x',
  method: 'POST',
  url: '/v1/chat/completions',
  body: { model: 'm', messages: [{ role: 'user', content: 'q'.repeat(250) }] },
})
const RESPONSE = JSON.stringify({ choices: [{ message: { content: 'a'.repeat(400) } }] })

const admin = postgres(BENCH_DATABASE_URL, { max: 1, onnotice: () => {} })

async function freshLines() {
  await admin.unsafe(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA};
    CREATE TABLE ${SCHEMA}.lines (batch_id text COLLATE "C" NOT NULL, line_no int NOT NULL,
      input text NOT NULL, status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0,
      not_before bigint NOT NULL DEFAULT 0,
      lease_owner text COLLATE "C", lease_until bigint, response text, cost_usd numeric,
      PRIMARY KEY (batch_id, line_no));
    CREATE INDEX ON ${SCHEMA}.lines (batch_id, line_no) WHERE status = 'pending';
    CREATE INDEX ON ${SCHEMA}.lines (lease_until) WHERE status = 'running';
    CREATE INDEX ON ${SCHEMA}.lines (lease_owner) WHERE status = 'running';`)
  await admin.unsafe(
    `INSERT INTO ${SCHEMA}.lines (batch_id, line_no, input)
     SELECT 'b', g, $1 FROM generate_series(1, ${LINES}) g`,
    [INPUT],
  )
  await admin.unsafe(`ANALYZE ${SCHEMA}.lines`)
}

/** One writer's loop from line `from` on: claim, and record what it claimed two claims before. */
async function write(
  sql: postgres.Sql,
  owner: string,
  turn: <T>(f: () => Promise<T>) => Promise<T>,
  from: number,
) {
  const groups: number[][] = []
  for (;;) {
    const rows = await turn(
      () => sql`
        WITH picked AS (
          SELECT line_no FROM ${sql(SCHEMA)}.lines WHERE batch_id = 'b' AND status = 'pending'
            AND not_before <= 1 AND line_no >= ${from}
          ORDER BY line_no LIMIT ${CLAIM} FOR UPDATE SKIP LOCKED)
        UPDATE ${sql(SCHEMA)}.lines l SET status = 'running', lease_owner = ${owner},
          lease_until = 1, attempts = l.attempts + 1
        FROM picked WHERE l.batch_id = 'b' AND l.line_no = picked.line_no
        RETURNING l.line_no, l.input`,
    )
    if (rows.length > 0) {
      groups.push(rows.map((row) => row.line_no as number))
      if (values.stripes) from = groups.at(-1)!.at(-1)! + 1
    } else if (from > 1 && groups.length === 0) {
      from = 1
      continue
    }
    if (groups.length > 2 || (rows.length === 0 && groups.length > 0)) {
      const group = groups.shift()!
      await turn(
        () => sql`
          UPDATE ${sql(SCHEMA)}.lines l SET status = 'succeeded', lease_owner = NULL,
            lease_until = NULL, response = ${RESPONSE}, cost_usd = 0.0001
          FROM unnest(${group}::int[]) AS g(line_no)
          WHERE l.batch_id = 'b' AND l.line_no = g.line_no AND l.status = 'running'`,
      )
    }
    if (rows.length === 0 && groups.length === 0) return
  }
}

/** µs of the writers' backends' CPU per line, for `count` writers. */
async function measure(count: number): Promise<number> {
  await freshLines()
  const writers = Array.from({ length: count }, () =>
    postgres(BENCH_DATABASE_URL, { max: 1, onnotice: () => {} }),
  )
  const pids: number[] = []
  for (const sql of writers) pids.push((await sql`SELECT pg_backend_pid() AS pid`)[0].pid)
  let queue: Promise<unknown> = Promise.resolve()
  const turn = <T>(f: () => Promise<T>): Promise<T> => {
    if (!values.serial) return f()
    const next = queue.then(f)
    queue = next.catch(() => {})
    return next
  }
  const cpu = async () => (await Promise.all(pids.map(cpuMs))).reduce((a, b) => a + b, 0)
  const before = await cpu()
  const start = (i: number) => (values.stripes ? Math.floor((i * LINES) / count) + 1 : 1)
  await Promise.all(writers.map((sql, i) => write(sql, `w${i}`, turn, start(i))))
  const used = (await cpu()) - before
  const [{ n }] = await admin.unsafe(
    `SELECT count(*)::int AS n FROM ${SCHEMA}.lines WHERE status = 'succeeded'`,
  )
  if (n !== LINES) throw new Error(`${n} of ${LINES} lines recorded`)
  await Promise.all(writers.map((sql) => sql.end()))
  return (used * 1000) / LINES
}

try {
  const counts = values.writers.split(',').map(Number)
  const results = new Map(counts.map((count) => [count, [] as number[]]))
  // Alternating, so that a busy moment of the machine falls on every count alike.
  for (let round = 0; round < Number(values.rounds); round++)
    for (const count of counts) results.get(count)!.push(await measure(count))
  console.log(
    `PostgreSQL CPU per line, ${LINES.toLocaleString('en-US')} lines claimed ${CLAIM} at a time and recorded, ` +
      `median of ${values.rounds}${values.serial ? ', writers taking turns' : ''}${values.stripes ? ', each on a stripe of its own' : ''}:`,
  )
  for (const [count, list] of results)
    console.log(
      `  ${count} writer${count === 1 ? ' ' : 's'}  ${median(list).toFixed(0).padStart(4)} µs/line   (${list.map((x) => x.toFixed(0)).join(', ')})`,
    )
} finally {
  await admin.unsafe(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)
  await admin.end()
}
