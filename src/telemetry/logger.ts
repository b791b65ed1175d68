/** JSON logs, one line per event. Callers pass ids and counts, never keys or prompts. */
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

export function createLogger(
  level: LogLevel,
  write: (line: string) => void = (l) => process.stdout.write(l),
): Logger {
  const at =
    (name: Exclude<LogLevel, 'silent'>) => (event: string, fields?: Record<string, unknown>) => {
      if (RANK[name] < RANK[level]) return
      write(
        JSON.stringify({ time: new Date().toISOString(), level: name, event, ...fields }) + '\n',
      )
    }
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    enabled: (name) => RANK[name] >= RANK[level],
  }
}
