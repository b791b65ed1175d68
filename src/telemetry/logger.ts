/**
 * JSON logs, one line per event. Callers pass ids and counts, never keys or prompts.
 *
 * Written to stdout in batches (log-batches.ts): a line is formatted where it is logged (so a
 * caller may reuse its fields object at once) and appended to a buffer that one write empties a
 * few milliseconds later, at once for an error, and on exit. At info level a live call logs one
 * line, and a write per line cost more than the rest of the logging (bench/proxy.ts).
 */
import { stdoutLines } from './log-batches.ts'

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent'
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 }

export interface Logger {
  debug(event: string, fields?: Record<string, unknown>): void
  info(event: string, fields?: Record<string, unknown>): void
  warn(event: string, fields?: Record<string, unknown>): void
  error(event: string, fields?: Record<string, unknown>): void
  /** Whether events at `level` are written: lets a caller skip building fields no one reads. */
  enabled(level: Exclude<LogLevel, 'silent'>): boolean
}

type Level = Exclude<LogLevel, 'silent'>

/**
 * `write` gets each line, newline included (tests collect them); by default they go to stdout in
 * batches, and an error line is written at once with every line before it.
 */
export function createLogger(level: LogLevel, write?: (line: string) => void): Logger {
  const sink = write ?? stdoutLines().write
  const urgent = write ? sink : (line: string) => stdoutLines().write(line, true)
  const at = (name: Level) => {
    if (RANK[name] < RANK[level]) return () => {}
    const out = name === 'error' ? urgent : sink
    return (event: string, fields?: Record<string, unknown>) => out(formatLine(name, event, fields))
  }
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    enabled: (name) => RANK[name] >= RANK[level],
  }
}

/**
 * `{"time":…,"level":…,"event":…,…fields}` and a newline: the same text as JSON.stringify of that
 * object, without building it. A field named time, level or event takes that key's place, as the
 * spread always did.
 */
function formatLine(level: Level, event: string, fields: Record<string, unknown> | undefined) {
  const time = isoNow()
  const head = `{"time":"${time}","level":"${level}","event":${JSON.stringify(event)}`
  if (fields === undefined) return `${head}}\n`
  if (
    Object.hasOwn(fields, 'time') ||
    Object.hasOwn(fields, 'level') ||
    Object.hasOwn(fields, 'event')
  )
    return JSON.stringify({ time, level, event, ...fields }) + '\n'
  const rest = JSON.stringify(fields)
  // '{}': no field to write (none, or only undefined ones).
  return rest.length === 2 ? `${head}}\n` : `${head},${rest.slice(1)}\n`
}

let lastMs = -1
let lastIso = ''

/** The time as toISOString() has it, made once per millisecond (a busy gateway logs many lines in one). */
function isoNow(): string {
  const ms = Date.now()
  if (ms !== lastMs) {
    lastMs = ms
    lastIso = new Date(ms).toISOString()
  }
  return lastIso
}
