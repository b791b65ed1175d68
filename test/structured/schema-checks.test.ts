/**
 * The schema threads themselves (src/schemas/schema-checks.ts): an answer past its budget is
 * unchecked and its thread replaced, after which the pool judges as before; one account's queue
 * of bombs does not hold another account's answers back behind it (turns by owner on one thread,
 * a thread kept free on two: src/schemas/schema-turns.ts); a closed pool answers what it still
 * held.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config.ts'
import { createCompileMemory, REFUSAL_MS } from '../../src/schemas/compile-memory.ts'
import { createSchemaChecks, type CompileVerdict } from '../../src/schemas/schema-checks.ts'
import { createSchemaThreads, type Job } from '../../src/schemas/schema-threads.ts'
import { bombSchema, compileBombSchema } from './hostile.ts'

const choices = (content: string) => [{ finishReason: 'stop', content, refusal: null }]
const ORDINARY = JSON.stringify({
  type: 'object',
  properties: { a: { type: 'string', pattern: '^[a-z]+$' } },
  required: ['a'],
})
const BOMB = JSON.stringify(bombSchema(24))

describe('MULTIGRID_SCHEMA_CHECK_MS', () => {
  test('100 ms by default; 1 to 60,000; anything else refused by name', () => {
    expect(loadConfig({}).schemaCheckMs).toBe(100)
    expect(loadConfig({ MULTIGRID_SCHEMA_CHECK_MS: '250' }).schemaCheckMs).toBe(250)
    expect(loadConfig({ MULTIGRID_SCHEMA_CHECK_MS: '1' }).schemaCheckMs).toBe(1)
    for (const bad of ['0', '60001', 'fast', '1.5'])
      expect(() => loadConfig({ MULTIGRID_SCHEMA_CHECK_MS: bad })).toThrow(
        'invalid MULTIGRID_SCHEMA_CHECK_MS',
      )
  })
})

describe('schema threads', () => {
  const checks = createSchemaChecks({ budgetMs: 50, threads: 1 })
  afterAll(() => checks.close())

  test('compile verdicts: ok with its recursion, invalid, a pattern RE2 cannot take', async () => {
    expect(await checks.compile(ORDINARY, 'a')).toMatchObject({ ok: true, recursion: null })
    expect(
      await checks.compile(JSON.stringify({ properties: { next: { $ref: '#' } } }), 'a'),
    ).toMatchObject({ ok: true, recursion: ['properties', 'next', '$ref'] })
    expect(await checks.compile('{"type": "strng"}', 'a')).toMatchObject({
      ok: false,
      reason: 'invalid',
    })
    expect(await checks.compile('{"pattern": "(?=x)"}', 'a')).toMatchObject({
      ok: false,
      reason: 'pattern',
    })
    // Also where nothing refers to it (Ajv compiles only what is reached), and as a
    // patternProperties key; a "pattern" that is data (a const, a property's name) is none.
    const unused = { $defs: { u: { type: 'string', pattern: '(?=x)' } }, type: 'object' }
    expect(await checks.compile(JSON.stringify(unused), 'a')).toMatchObject({
      ok: false,
      reason: 'pattern',
    })
    const named = { $defs: { default: { type: 'string', pattern: '(?=x)' } } }
    expect(await checks.compile(JSON.stringify(named), 'a')).toMatchObject({
      ok: false,
      reason: 'pattern',
    })
    const keyed = { $defs: { u: { patternProperties: { '(?!a)': {} } } } }
    expect(await checks.compile(JSON.stringify(keyed), 'a')).toMatchObject({
      ok: false,
      reason: 'pattern',
    })
    const data = {
      type: 'object',
      properties: { pattern: { type: 'string' } },
      default: { pattern: '(?=x)' },
      examples: [{ pattern: '(?=x)' }],
    }
    expect(await checks.compile(JSON.stringify(data), 'a')).toMatchObject({ ok: true })
  })

  test('a bomb is unchecked and its thread replaced; the next answers are judged as before', async () => {
    const replaced = checks.replaced
    const verdict = await checks.judge({ text: BOMB, name: 'bomb', choices: choices('"x"') }, 'a')
    expect(verdict).toMatchObject({ checked: false })
    expect(checks.replaced).toBe(replaced + 1)
    const job = (content: string) => ({ text: ORDINARY, name: 'o', choices: choices(content) })
    expect(await checks.judge(job('{"a": "ok"}'), 'a')).toEqual({ checked: true, problem: null })
    const wrong = await checks.judge(job('{"a": "NO"}'), 'a')
    expect(wrong).toMatchObject({ checked: true })
    expect((wrong as { problem: string }).problem).toContain('must match pattern')
  })

  test("another owner's answer is judged before the first owner's queue of bombs is through", async () => {
    const order: string[] = []
    const bombs = Array.from({ length: 4 }, (_, i) =>
      checks
        .judge({ text: BOMB, name: 'bomb', choices: choices('"x"') }, 'attacker')
        .then(() => order.push(`bomb-${i}`)),
    )
    const other = checks
      .judge({ text: ORDINARY, name: 'o', choices: choices('{"a": "ok"}') }, 'other')
      .then((verdict) => {
        order.push('other')
        return verdict
      })
    expect(await other).toEqual({ checked: true, problem: null })
    await Promise.all(bombs)
    // One thread, turns by owner: the other's answer waits for the bomb running and at most the
    // attacker's turn taken before it arrived, not for all four.
    expect(order.indexOf('other')).toBeLessThanOrEqual(2)
    expect(order).toHaveLength(5)
  })

  test('a closed pool answers the jobs it held without a verdict', async () => {
    const pool = createSchemaChecks({ budgetMs: 50, threads: 1 })
    const pending = pool.compile(ORDINARY, 'a')
    await pool.close()
    expect(await pending).toMatchObject({ ok: false, reason: 'budget' })
  })
})

describe('a schema refused once', () => {
  test('a burst of one owner compiles it once; sent again, by anyone, it is refused at once', async () => {
    const pool = createSchemaChecks({ budgetMs: 20, threads: 1 })
    try {
      const bomb = JSON.stringify(compileBombSchema())
      const burst = await Promise.all([1, 2, 3].map(() => pool.compile(bomb, 'attacker')))
      for (const verdict of burst) expect(verdict).toMatchObject({ ok: false, reason: 'budget' })
      // One compile ran past its budget and had its thread replaced, not three.
      expect(pool.replaced).toBe(1)
      const again = await pool.compile(bomb, 'another')
      expect(again).toMatchObject({ ok: false, reason: 'budget', ms: 0 })
      expect(again.ok === false && again.message).toBe(burst[0].ok === false && burst[0].message)
      expect(pool.replaced).toBe(1)
      // The thread still compiles and judges what it is sent.
      expect(await pool.compile(ORDINARY, 'another')).toMatchObject({ ok: true })
    } finally {
      await pool.close()
    }
  })

  test('a refusal is remembered for REFUSAL_MS; a compile that passed is not kept', async () => {
    let clock = 0
    const memory = createCompileMemory<CompileVerdict>({
      kept: (refusal) => refusal.ok || refusal.reason !== 'budget' || refusal.ms >= 100,
      now: () => clock,
    })
    const compiled: string[] = []
    const compile = (text: string, verdict: CompileVerdict) => () => {
      compiled.push(text)
      return Promise.resolve(verdict)
    }
    const refused: CompileVerdict = { ok: false, reason: 'invalid', message: 'no', ms: 3 }
    const passed: CompileVerdict = { ok: true, recursion: null, ms: 3 }
    expect(await memory.once('a', 'bad', compile('bad', refused))).toEqual(refused)
    clock = REFUSAL_MS - 1
    expect(await memory.once('b', 'bad', compile('bad', refused))).toEqual({ ...refused, ms: 0 })
    clock = REFUSAL_MS
    expect(await memory.once('b', 'bad', compile('bad', refused))).toEqual(refused)
    await memory.once('a', 'good', compile('good', passed))
    await memory.once('a', 'good', compile('good', passed))
    // A reply missing before the budget (a thread that died, a pool closing) is not the text's.
    const lost: CompileVerdict = { ok: false, reason: 'budget', message: 'lost', ms: 5 }
    await memory.once('a', 'lost', compile('lost', lost))
    await memory.once('a', 'lost', compile('lost', lost))
    expect(compiled).toEqual(['bad', 'bad', 'good', 'good', 'lost', 'lost'])
  })
})

describe('the budget sweep', () => {
  test('runs while a thread is busy and stops when none is, also after a thread was cut', async () => {
    const queue: Job[] = []
    const threads = createSchemaThreads({
      threads: 1,
      judgeMs: 50,
      compileMs: 50,
      take: () => queue.shift() ?? null,
    })
    try {
      const run = (request: Job['request']) =>
        new Promise<unknown>((resolve) => {
          queue.push({ request, finish: (reply) => resolve(reply) })
          threads.pump()
        })
      expect(threads.sweeping).toBe(false)
      const ordinary = run({ kind: 'compile', text: ORDINARY })
      // Not before the thread has started: the job waits in the queue until then.
      for (let i = 0; i < 200 && !threads.sweeping; i++) await Bun.sleep(10)
      expect(threads.sweeping).toBe(true)
      expect(await ordinary).toMatchObject({ kind: 'compiled', ok: true })
      // The next sweep sees no busy thread and stops itself (50 ms budget: every 12.5 ms).
      await Bun.sleep(100)
      expect(threads.sweeping).toBe(false)
      // An answer whose judging runs past its budget is cut by the sweep, which then stops too.
      const bomb = { kind: 'judge', text: BOMB, name: 'bomb', choices: choices('"x"') } as const
      expect(await run(bomb)).toBeNull()
      expect(threads.replaced).toBe(1)
      await Bun.sleep(100)
      expect(threads.sweeping).toBe(false)
    } finally {
      threads.close()
    }
  })
})

describe('two threads, one owner with a queue of bombs', () => {
  test("another owner's answers, one after another, start at once on the thread kept free", async () => {
    const pool = createSchemaChecks({ budgetMs: 50, threads: 2 })
    try {
      let bombed = 0
      const bombs = Array.from({ length: 10 }, () =>
        pool
          .judge({ text: BOMB, name: 'bomb', choices: choices('"x"') }, 'attacker')
          .then((verdict) => (bombed++, verdict)),
      )
      // Once a bomb has held a thread for its budget, its owner keeps to one thread.
      await Promise.race(bombs)
      const before = bombed
      const job = { text: ORDINARY, name: 'o', choices: choices('{"a": "ok"}') }
      for (let i = 0; i < 5; i++)
        expect(await pool.judge(job, 'other')).toEqual({ checked: true, problem: null })
      // Round-robin alone had each of these wait for one of the attacker's bombs (two threads, two
      // bombs through per answer), and the attacker's queue was through first. Now the first
      // waits at most for the bomb still running, and the others for none.
      expect(bombed - before).toBeLessThanOrEqual(3)
      await pool.close()
      for (const verdict of await Promise.all(bombs))
        expect(verdict).toMatchObject({ checked: false })
    } finally {
      await pool.close()
    }
  }, 30_000)
})
