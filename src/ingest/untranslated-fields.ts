/**
 * A chat body that may go to an Anthropic offering is translated there
 * (providers/anthropic/convert-to-anthropic-messages.ts), and a field the translation does not
 * carry over would be dropped without a word: `top_k`, `reasoning_effort`, `verbosity`. Such a
 * field is refused, as the catalog's unsupported_params are (docs/configuration.md), never dropped;
 * one at OpenAI's default (`frequency_penalty: 0`) drops nothing. So is a body whose messages
 * leave Anthropic none to send (only system messages, or only empty ones): Anthropic refuses an
 * empty `messages`, and nothing in the body could fill it.
 */
import {
  leavesNoAnthropicMessage,
  TRANSLATED_CHAT_FIELDS,
} from '../../providers/anthropic/convert-to-anthropic-messages.ts'
import type { ModelEntry } from '../catalog/catalog-file.ts'
import type { BodyProblem } from './issues.ts'
import { setsNothing } from './no-op-params.ts'

type Targets = readonly { kind: 'openai' | 'anthropic'; offering: { provider: string } }[]

/** The Anthropic providers among a body's targets, and whether others are left to route to. */
function anthropicOf(targets: Targets): { anthropic: string[]; others: boolean } {
  const anthropic = targets.filter((t) => t.kind === 'anthropic').map((t) => t.offering.provider)
  return { anthropic, others: targets.length > anthropic.length }
}

/** The fix's ending that routes a body away from Anthropic, where another offering is left. */
function routeAway(anthropic: string[], others: boolean): string {
  return others
    ? `, or route the request away with "provider": {"ignore": ${JSON.stringify(anthropic)}}`
    : ''
}

export function untranslatedFields(
  record: Record<string, unknown>,
  model: ModelEntry,
  targets: Targets,
  at: (field: string) => string,
): BodyProblem[] {
  const { anthropic, others } = anthropicOf(targets)
  if (anthropic.length === 0) return []
  const problems: BodyProblem[] = []
  for (const [field, value] of Object.entries(record)) {
    if (TRANSLATED_CHAT_FIELDS.has(field) || setsNothing(field, value)) continue
    problems.push({
      path: at(field),
      message: `is not carried over to ${anthropic.join(', ')} (Anthropic's API), which may serve ${model.id}: it would be dropped`,
      fix: `remove ${field}${routeAway(anthropic, others)}`,
    })
  }
  return problems
}

/**
 * A chat body whose messages leave Anthropic nothing to send: system messages go to its `system`,
 * and messages with empty content are left out (docs/configuration.md), so a body of only those
 * would reach it with no message, which it refuses.
 */
export function noMessageLeft(
  messages: readonly unknown[],
  model: ModelEntry,
  targets: Targets,
  at: (field: string) => string,
): BodyProblem | null {
  const { anthropic, others } = anthropicOf(targets)
  if (anthropic.length === 0 || !leavesNoAnthropicMessage(messages)) return null
  return {
    path: at('messages'),
    message: `has no user or assistant message with content, which ${anthropic.join(', ')} (Anthropic's API) needs, and which may serve ${model.id}: system messages go apart and empty ones are left out`,
    fix: `add a user message with text, such as {"role": "user", "content": "Hello"}${routeAway(anthropic, others)}`,
  }
}
