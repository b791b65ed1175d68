/**
 * Rules Anthropic's Messages API holds a body to that OpenAI's chat API does not, refused here as
 * Anthropic refuses them (its words), so that a translation breaking one fails every test that
 * reaches the simulator rather than only in front of the real API.
 */
type Block = { type?: unknown; text?: unknown; id?: unknown }

const TOOL_USE_ID = /^[a-zA-Z0-9_-]+$/

/** Anthropic's message for the first rule `body` breaks, or null. */
export function anthropicBodyProblem(body: Record<string, unknown>): string | null {
  const messages = body.messages as { role?: unknown; content?: unknown }[]
  for (const [index, message] of messages.entries()) {
    const last = index === messages.length - 1 && message.role === 'assistant'
    const problem = contentProblem(message.content, `messages.${index}`, last)
    if (problem) return problem
  }
  const choice = body.tool_choice as { type?: unknown; disable_parallel_tool_use?: unknown }
  if (choice !== undefined && !(Array.isArray(body.tools) && body.tools.length > 0))
    return 'tool_choice may only be specified while providing tools'
  if (choice?.type === 'none' && choice.disable_parallel_tool_use !== undefined)
    return 'tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted'
  return null
}

function contentProblem(content: unknown, at: string, finalAssistant: boolean): string | null {
  const empty =
    'all messages must have non-empty content except for the optional final assistant message'
  if (typeof content === 'string') {
    if (content === '' && !finalAssistant) return `${at}: ${empty}`
    if (!finalAssistant && !/\S/.test(content))
      return `${at}: text content blocks must contain non-whitespace text`
    if (finalAssistant && content !== content.trimEnd())
      return 'final assistant content cannot end with trailing whitespace'
    return null
  }
  if (!Array.isArray(content)) return null
  if (content.length === 0 && !finalAssistant) return `${at}: ${empty}`
  const texts = (content as Block[]).filter((block) => block?.type === 'text')
  // Whitespace beside other text keeps words apart; a message whose text is all whitespace is refused.
  if (
    texts.length > 0 &&
    texts.every((block) => typeof block.text === 'string' && !/\S/.test(block.text))
  )
    return `${at}: text content blocks must contain non-whitespace text`
  for (const [index, block] of (content as Block[]).entries()) {
    if (block?.type === 'text' && block.text === '')
      return `${at}.content.${index}: text content blocks must be non-empty`
    if (block?.type === 'tool_use' && !(typeof block.id === 'string' && TOOL_USE_ID.test(block.id)))
      return `${at}.content.${index}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`
  }
  const tail = (content as Block[]).at(-1)
  if (
    finalAssistant &&
    tail?.type === 'text' &&
    typeof tail.text === 'string' &&
    tail.text !== tail.text.trimEnd()
  )
    return 'final assistant content cannot end with trailing whitespace'
  return null
}
