/**
 * Judges a structured batch line's answer (SPEC §14): every choice that stopped on its own
 * (`finish_reason: "stop"`) must hold JSON, valid against the line's schema when it gave one. A
 * choice cut at max_tokens (`"length"`) is the caller's to judge: it is returned as it is, as
 * OpenAI does. A refusal (OpenAI's `message.refusal`, content null) is an answer too.
 */
import { compileAnswerSchema } from './answer-schema.ts'

/** Null when the answer is what the line asked for; otherwise why it is not. */
export function structuredAnswerProblem(
  responseFormat: unknown,
  response: Record<string, unknown>,
): string | null {
  const format = responseFormat as {
    type?: unknown
    json_schema?: { name?: unknown; schema?: unknown }
  } | null
  if (format?.type !== 'json_object' && format?.type !== 'json_schema') return null
  let check: ((value: unknown) => string | null) | null = null
  const schema = format.json_schema?.schema
  if (format.type === 'json_schema' && typeof schema === 'object' && schema !== null) {
    // Compiled at validation; here from this thread's cache, or again after a restart.
    const compiled = compileAnswerSchema(schema as Record<string, unknown>)
    // A schema this gateway once accepted and now cannot compile: the answer is not judged.
    if (compiled.ok) check = (value) => compiled.schema.check(value)
  }
  const choices = Array.isArray(response.choices) ? response.choices : []
  const several = choices.length > 1
  for (const [i, raw] of choices.entries()) {
    const choice = raw as { finish_reason?: unknown; message?: Record<string, unknown> } | null
    if (choice?.finish_reason !== 'stop') continue
    const message = choice.message ?? {}
    const which = several ? `choice ${i}` : 'the answer'
    const content = message.content
    if (typeof content !== 'string') {
      if (typeof message.refusal === 'string') continue
      return `${which} stopped on its own with no content; response_format ${format.type} asked for JSON`
    }
    let value: unknown
    try {
      value = JSON.parse(content)
    } catch (error) {
      return `${which} stopped on its own but its content is not JSON (${(error as Error).message})`
    }
    const wrong = check?.(value) ?? null
    if (wrong !== null) {
      const name = typeof format.json_schema?.name === 'string' ? ` ${format.json_schema.name}` : ''
      return `${which} stopped on its own but is not valid against the schema${name}: ${wrong}`
    }
  }
  return null
}
