/**
 * What a request can ask of a provider that the gateway cannot size from the request itself
 * (docs/money-and-limits.md): content the provider fetches or reads on its own — an Anthropic
 * document by URL, by Files API id or as a PDF (each page is read as text and as an image, so
 * its tokens are not its bytes), a Responses `input_file` — and the provider's own tools, which
 * it runs and bills per call (a web search: $10 per 1,000 at Anthropic and OpenAI, plus the
 * results it pulls into the prompt).
 *
 * The first is priced at the model's whole context window of input, and settled at the usage
 * reported; the second is refused, as the catalog has no price for their calls.
 */

type Block = Record<string, unknown>

/**
 * The key that marks a text part of the chat body pricing a passed-through request as standing
 * for unsized content: its ceiling counts the model's context window (src/pricing/ceiling.ts).
 */
export const UNSIZED = 'unsized'

/** A chat text part standing for `block`, which the provider reads itself: its JSON, marked. */
export const unsizedPart = (block: unknown): Block => ({
  type: 'text',
  text: JSON.stringify(block),
  [UNSIZED]: true,
})

/** Whether an Anthropic content block is one the provider reads itself (not text the body holds). */
export function anthropicBlockUnsized(block: Block): boolean {
  if (block.type === 'container_upload') return true
  if (block.type !== 'document') return false
  // A text document is its text; a URL, a file id, a base64 PDF or a content source is not sized.
  return (block.source as { type?: unknown } | undefined)?.type !== 'text'
}

/** Whether a chat body's messages hold a part marked unsized. */
export function holdsUnsized(messages: readonly unknown[]): boolean {
  return messages.some((message) => {
    const content = (message as { content?: unknown } | null)?.content
    return Array.isArray(content) && content.some((part) => part?.[UNSIZED] === true)
  })
}

/**
 * Anthropic's tools that the caller's client runs (their calls come back as tool_use blocks):
 * billed as tokens only. Every other typed tool is a server tool, run and billed at Anthropic.
 */
const ANTHROPIC_CLIENT_TOOLS = /^(bash|text_editor|computer|memory)_\d+$/

/** The Responses API's tools the caller runs; the others (web_search, file_search, …) OpenAI runs. */
export const RESPONSES_CLIENT_TOOLS = new Set([
  'function',
  'custom',
  'local_shell',
  'shell',
  'apply_patch',
  'computer_use_preview',
])

/** Whether an Anthropic tool definition is a server tool: run and billed per call at Anthropic. */
export const anthropicServerTool = (tool: Block): boolean =>
  typeof tool.type === 'string' && tool.type !== 'custom' && !ANTHROPIC_CLIENT_TOOLS.test(tool.type)

/**
 * Why a provider-run tool is refused, after its path: `instead` is the function tool to send.
 */
export function providerToolRefusal(type: unknown, instead: string): string {
  const named = String(JSON.stringify(type)).slice(0, 80)
  return `is ${named}, a tool the provider runs and bills per call: this gateway bills tokens at list price and has no price for that tool's calls, so it cannot hold what they cost; send a function tool (${instead}) that your code runs, for a search with the search service of your choice`
}
