/**
 * A command line's refusal of an option (node:util parseArgs) in plain words: the option as typed
 * and the one likely meant, instead of Node's advice on positional arguments that start with "-".
 */
import { likelyMeant } from '../http/parse-query.ts'

export function optionProblem(error: unknown, options: Record<string, unknown>): string {
  const message = (error as Error).message
  const unknown = /^Unknown option '(-{1,2}[^']+)'/.exec(message)
  if (!unknown) return message
  const typed = unknown[1]!
  const meant = likelyMeant(typed.replace(/^-+/, ''), Object.keys(options))
  return `unknown option ${typed}${meant ? `; did you mean --${meant}?` : ''}`
}
