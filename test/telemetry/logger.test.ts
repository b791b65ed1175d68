/**
 * The JSON logger: each line the text JSON.stringify gives the event, written to stdout in
 * batches that keep the order and lose nothing on exit, an uncaught error or process.exit().
 */
import { describe, expect, test } from 'bun:test'
import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLineBatches } from '../../src/telemetry/log-batches.ts'
import { createLogger } from '../../src/telemetry/logger.ts'

const ROOT = join(import.meta.dir, '../..')

describe('lines', () => {
  const cases: [string, Record<string, unknown> | undefined][] = [
    ['no fields', undefined],
    ['empty fields', {}],
    ['only undefined fields', { a: undefined }],
    [
      'mixed fields',
      { method: 'POST', route: null, path: '/v1/x "q"\n', status: 200, duration_ms: 1.5, n: [1] },
    ],
    ['a field named time', { status: 1, time: 'mine' }],
    ['a field named event', { event: 'other', level: 'x' }],
  ]
  for (const [name, fields] of cases) {
    test(`${name}: the text of JSON.stringify({ time, level, event, ...fields })`, () => {
      const lines: string[] = []
      const logger = createLogger('debug', (line) => lines.push(line))
      logger.info('some.event "quoted"', fields)
      expect(lines).toHaveLength(1)
      expect(lines[0].endsWith('\n')).toBe(true)
      const { time } = JSON.parse(lines[0]) as { time: string }
      const expected = { time, level: 'info', event: 'some.event "quoted"', ...fields }
      expect(lines[0]).toBe(JSON.stringify(expected) + '\n')
      if (!fields || !('time' in fields)) expect(new Date(time).toISOString()).toBe(time)
    })
  }

  test("levels below the logger's are not written", () => {
    const lines: string[] = []
    const logger = createLogger('warn', (line) => lines.push(line))
    logger.debug('a')
    logger.info('b')
    logger.warn('c')
    logger.error('d')
    expect(lines.map((l) => (JSON.parse(l) as { event: string }).event)).toEqual(['c', 'd'])
    expect(logger.enabled('info')).toBe(false)
    expect(logger.enabled('warn')).toBe(true)
  })
})

describe('batches', () => {
  const file = () => {
    const path = join(mkdtempSync(join(tmpdir(), 'mg-log-')), 'out.log')
    return { path, fd: openSync(path, 'w'), read: () => readFileSync(path, 'utf8') }
  }

  test('lines wait for the timer, then are written in one go, in order', async () => {
    const out = file()
    const batches = createLineBatches({ fd: out.fd, flushMs: 30, maxBytes: 1 << 20 })
    for (let i = 0; i < 100; i++) batches.write(`line ${i}\n`)
    expect(out.read()).toBe('')
    await Bun.sleep(80)
    expect(out.read()).toBe(Array.from({ length: 100 }, (_, i) => `line ${i}\n`).join(''))
    closeSync(out.fd)
  })

  test('an urgent line is written at once, after every line before it', () => {
    const out = file()
    const batches = createLineBatches({ fd: out.fd, flushMs: 60_000, maxBytes: 1 << 20 })
    batches.write('first\n')
    batches.write('second\n')
    expect(out.read()).toBe('')
    batches.write('error\n', true)
    expect(out.read()).toBe('first\nsecond\nerror\n')
    closeSync(out.fd)
  })

  test('a full buffer is written at once', () => {
    const out = file()
    const batches = createLineBatches({ fd: out.fd, flushMs: 60_000, maxBytes: 100 })
    batches.write(`${'x'.repeat(60)}\n`)
    expect(out.read()).toBe('')
    batches.write(`${'é'.repeat(60)}\n`)
    expect(out.read()).toBe(`${'x'.repeat(60)}\n${'é'.repeat(60)}\n`)
    closeSync(out.fd)
  })
})

describe('stdout on the way out', () => {
  // A child process that logs `count` lines at info, then ends as `how` says.
  const run = async (how: 'throw' | 'exit' | 'end' | 'reject', slowReader = false) => {
    const script = `
      import { createLogger } from ${JSON.stringify(join(ROOT, 'src/telemetry/logger.ts'))}
      const logger = createLogger('info')
      for (let i = 0; i < 5000; i++) logger.info('n', { i, pad: 'x'.repeat(80) })
      const how = ${JSON.stringify(how)}
      if (how === 'throw') setTimeout(() => { throw new Error('boom') }, 1)
      if (how === 'reject') void Promise.reject(new Error('boom'))
      if (how === 'exit') process.exit(0)
    `
    const dir = mkdtempSync(join(tmpdir(), 'mg-log-child-'))
    const path = join(dir, 'child.ts')
    await Bun.write(path, script)
    const child = Bun.spawn([process.execPath, path], { stdout: 'pipe', stderr: 'ignore' })
    // A reader that starts late leaves the pipe full while the child ends.
    if (slowReader) await Bun.sleep(300)
    const text = await new Response(child.stdout).text()
    await child.exited
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { i: number }).i)
  }
  const all = Array.from({ length: 5000 }, (_, i) => i)

  for (const how of ['end', 'exit', 'throw', 'reject'] as const) {
    test(`${how}: every line arrives, in order, even to a reader that starts late`, async () => {
      expect(await run(how)).toEqual(all)
      expect(await run(how, true)).toEqual(all)
    })
  }
})
