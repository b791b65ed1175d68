/**
 * Judges a structured batch line's answer (docs/open-models.md): every choice that stopped on its own
 * (`finish_reason: "stop"`) must hold JSON, valid against the line's schema when it gave one. A
 * choice cut at max_tokens (`"length"`) is the caller's to judge: it is returned as it is, as
 * OpenAI does. A refusal (OpenAI's `message.refusal`, content null) is an answer too.
 *
 * In two parts, so that the part a tenant's schema can make slow runs where it cannot stall
 * anyone (schema-worker.ts): the choices are read out of the response here, and judged by
 * `judgeChoices`, given the schema's check or none.
 */
import { compileAnswerSchema } from './answer-schema.ts'

/** What judging needs of one choice: a few fields, small to send to a thread. */
export interface AnswerChoice {
  finishReason: unknown
  content: unknown
  refusal: unknown
}

export function answerChoices(response: Record<string, unknown>): AnswerChoice[] {
  if (response.object === 'response') return [responseChoice(response)]
  if (response.type === 'message') return [messageChoice(response)]
  const choices = Array.isArray(response.choices) ? response.choices : []
  return choices.map((raw) => {
    const choice = raw as { finish_reason?: unknown; message?: Record<string, unknown> } | null
    const message = choice?.message ?? {}
    return {
      finishReason: choice?.finish_reason,
      content: message.content,
      refusal: message.refusal,
    }
  })
}

/**
 * A Response object (a Responses line passed through) as the one choice it amounts to: its
 * message items' output text, a refusal part's text, and "length" when it was cut at
 * max_output_tokens, as chat says it.
 */
function responseChoice(response: Record<string, unknown>): AnswerChoice {
  let content: string | null = null
  let refusal: string | null = null
  const output = Array.isArray(response.output) ? response.output : []
  for (const item of output as { type?: unknown; content?: unknown }[]) {
    if (item?.type !== 'message' || !Array.isArray(item.content)) continue
    for (const part of item.content as { type?: unknown; text?: unknown; refusal?: unknown }[]) {
      if (part?.type === 'output_text' && typeof part.text === 'string')
        content = (content ?? '') + part.text
      if (part?.type === 'refusal' && typeof part.refusal === 'string') refusal = part.refusal
    }
  }
  const cut = response.status === 'incomplete'
  return { finishReason: cut ? 'length' : 'stop', content, refusal }
}

/** Anthropic's stop reasons as chat's finish reasons; another one is not judged. */
const MESSAGE_FINISH: Record<string, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  tool_use: 'tool_calls',
}

/**
 * An Anthropic message (a Messages line passed through with output_config.format) as the one
 * choice it amounts to: its text blocks' text; a refusal (`stop_reason: "refusal"`) is an answer
 * too, as OpenAI's is.
 */
function messageChoice(response: Record<string, unknown>): AnswerChoice {
  const blocks = Array.isArray(response.content) ? response.content : []
  const texts = (blocks as { type?: unknown; text?: unknown }[])
    .filter((block) => block?.type === 'text' && typeof block.text === 'string')
    .map((block) => block.text as string)
  const reason = String(response.stop_reason)
  const refused = reason === 'refusal'
  return {
    finishReason: refused ? 'stop' : (MESSAGE_FINISH[reason] ?? reason),
    content: refused || texts.length === 0 ? null : texts.join(''),
    refusal: refused ? texts.join('') : null,
  }
}

/** The line's response_format as judging reads it: null when the answer is not checked. */
export function answerFormat(
  responseFormat: unknown,
): { type: 'json_object' | 'json_schema'; name: string | null; schema: object | null } | null {
  const format = responseFormat as {
    type?: unknown
    json_schema?: { name?: unknown; schema?: unknown }
  } | null
  if (format?.type !== 'json_object' && format?.type !== 'json_schema') return null
  const schema = format.json_schema?.schema
  return {
    type: format.type,
    name: typeof format.json_schema?.name === 'string' ? format.json_schema.name : null,
    schema:
      format.type === 'json_schema' && typeof schema === 'object' && schema !== null
        ? schema
        : null,
  }
}

/** Null when every choice is what the line asked for; otherwise why one is not. */
export function judgeChoices(
  type: 'json_object' | 'json_schema',
  name: string | null,
  choices: readonly AnswerChoice[],
  check: ((value: unknown) => string | null) | null,
): string | null {
  const several = choices.length > 1
  for (const [i, choice] of choices.entries()) {
    if (choice.finishReason !== 'stop') continue
    const which = several ? `choice ${i}` : 'the answer'
    const content = choice.content
    if (typeof content !== 'string') {
      if (typeof choice.refusal === 'string') continue
      return `${which} stopped on its own with no content; response_format ${type} asked for JSON`
    }
    let value: unknown
    try {
      value = JSON.parse(content)
    } catch (error) {
      return `${which} stopped on its own but its content is not JSON (${(error as Error).message})`
    }
    const wrong = check?.(value) ?? null
    if (wrong !== null) {
      return `${which} stopped on its own but is not valid against the schema${name === null ? '' : ` ${name}`}: ${wrong}`
    }
  }
  return null
}

/**
 * The whole judgement in this thread, with no time budget: for a schema the caller trusts (the
 * simulator's tests, the bench's baseline). The gateway judges through schema-checks.ts.
 */
export function structuredAnswerProblem(
  responseFormat: unknown,
  response: Record<string, unknown>,
): string | null {
  const format = answerFormat(responseFormat)
  if (format === null) return null
  let check: ((value: unknown) => string | null) | null = null
  if (format.schema !== null) {
    const compiled = compileAnswerSchema(format.schema as Record<string, unknown>)
    // A schema this gateway once accepted and now cannot compile: the answer is not judged.
    if (compiled.ok) check = (value) => compiled.schema.check(value)
  }
  return judgeChoices(format.type, format.name, answerChoices(response), check)
}
