/**
 * A chat body that may go to an Anthropic offering is translated there
 * (providers/anthropic/convert-to-anthropic-messages.ts), and a field the translation does not
 * carry over would be dropped without a word: `top_k`, `reasoning_effort`, `verbosity`. Such a
 * field is refused, as the catalog's unsupported_params are (docs/configuration.md), never dropped;
 * one at OpenAI's default (`frequency_penalty: 0`) drops nothing.
 */
import { TRANSLATED_CHAT_FIELDS } from '../../providers/anthropic/convert-to-anthropic-messages.ts'
import type { ModelEntry } from '../catalog/catalog-file.ts'
import type { BodyProblem } from './issues.ts'
import { setsNothing } from './no-op-params.ts'

export function untranslatedFields(
  record: Record<string, unknown>,
  model: ModelEntry,
  targets: readonly { kind: 'openai' | 'anthropic'; offering: { provider: string } }[],
  at: (field: string) => string,
): BodyProblem[] {
  const anthropic = targets.filter((t) => t.kind === 'anthropic').map((t) => t.offering.provider)
  if (anthropic.length === 0) return []
  const others = targets.length > anthropic.length
  const problems: BodyProblem[] = []
  for (const [field, value] of Object.entries(record)) {
    if (TRANSLATED_CHAT_FIELDS.has(field) || setsNothing(field, value)) continue
    problems.push({
      path: at(field),
      message: `is not carried over to ${anthropic.join(', ')} (Anthropic's API), which may serve ${model.id}: it would be dropped`,
      fix: `remove ${field}${others ? `, or route the request away with "provider": {"ignore": ${JSON.stringify(anthropic)}}` : ''}`,
    })
  }
  return problems
}
