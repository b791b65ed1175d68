/**
 * A chat.completion → OpenAI's Response object (docs/clients/responses.md): the text as one message item with an
 * output_text part, each tool call as a function_call item, usage in the Responses names. The
 * request's own settings are echoed as OpenAI echoes them.
 */
// 128 random bits as 32 hex digits, from a pool of random bytes filled 256 ids at a time: about
// 0.3 µs an id, against 1–1.8 for randomUUID().replaceAll('-', '') and more for
// randomBytes(16).toString('hex'), twice on every translated answer.
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))
const randomPool = new Uint8Array(4096)
let poolAt = randomPool.length
function hex(): string {
  if (poolAt + 16 > randomPool.length) {
    crypto.getRandomValues(randomPool)
    poolAt = 0
  }
  let text = ''
  for (let i = poolAt; i < poolAt + 16; i++) text += HEX[randomPool[i]]
  poolAt += 16
  return text
}
export const newResponseId = () => `resp_${hex()}`
export const newItemId = (prefix: 'msg' | 'fc') => `${prefix}_${hex()}`

/**
 * OpenAI's input_tokens_details, and the prompt tokens written to the cache where the provider
 * reports them, as the chat usage has them (docs/pricing.md).
 */
export function inputDetails(cached: number | undefined, written: number | undefined) {
  return written
    ? { cached_tokens: cached ?? 0, cache_write_tokens: written }
    : { cached_tokens: cached ?? 0 }
}

/** Responses usage from chat usage (prompt_tokens, completion_tokens and their details). */
export function responsesUsage(usage: unknown) {
  const u = (usage ?? {}) as {
    prompt_tokens?: number
    completion_tokens?: number
    prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number }
    completion_tokens_details?: { reasoning_tokens?: number }
  }
  const input = u.prompt_tokens ?? 0
  const output = u.completion_tokens ?? 0
  return {
    input_tokens: input,
    input_tokens_details: inputDetails(
      u.prompt_tokens_details?.cached_tokens,
      u.prompt_tokens_details?.cache_write_tokens,
    ),
    output_tokens: output,
    output_tokens_details: {
      reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0,
    },
    total_tokens: input + output,
  }
}

/** The Response object around its output: the request's settings, a status, no output yet. */
export function responseShell(request: Record<string, unknown>, id: string, createdAt: number) {
  const or = <T>(value: unknown, fallback: T) => (value === undefined ? fallback : value)
  return {
    id,
    object: 'response' as const,
    created_at: createdAt,
    status: 'in_progress' as string,
    background: false,
    error: null,
    incomplete_details: null as null | { reason: string },
    instructions: or(request.instructions, null),
    max_output_tokens: or(request.max_output_tokens, null),
    model: String(request.model),
    output: [] as Record<string, unknown>[],
    parallel_tool_calls: or(request.parallel_tool_calls, true),
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: or(request.temperature, 1),
    text: or(request.text, { format: { type: 'text' } }),
    tool_choice: or(request.tool_choice, 'auto'),
    tools: or(request.tools, []),
    top_p: or(request.top_p, 1),
    truncation: 'disabled',
    usage: null as ReturnType<typeof responsesUsage> | null,
    user: null,
    metadata: or(request.metadata, {}),
  }
}

export const textPart = (text: string) => ({
  type: 'output_text' as const,
  text,
  annotations: [],
  logprobs: [],
})

export function messageItem(id: string, text: string, status = 'completed') {
  return { id, type: 'message', status, role: 'assistant', content: [textPart(text)] }
}

export function functionCallItem(
  id: string,
  call: { id?: unknown; name?: unknown; arguments?: unknown },
  status = 'completed',
) {
  return {
    id,
    type: 'function_call',
    status,
    call_id: String(call.id ?? id),
    name: String(call.name ?? ''),
    arguments: typeof call.arguments === 'string' ? call.arguments : '',
  }
}

/** The status of the answer's last item: cut short with the Response, or whole. */
export const lastItemStatus = (finishReason: unknown) =>
  finishStatus(finishReason).status === 'incomplete' ? 'incomplete' : 'completed'

/** A finish reason's effect on the Response's status. */
export function finishStatus(finishReason: unknown) {
  return finishReason === 'length'
    ? { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } }
    : finishReason === 'content_filter'
      ? { status: 'incomplete', incomplete_details: { reason: 'content_filter' } }
      : { status: 'completed', incomplete_details: null }
}

export function convertChatToResponse(
  completion: Record<string, unknown>,
  request: Record<string, unknown>,
  createdAt = Math.floor(Date.now() / 1000),
) {
  const choice = ((completion.choices as unknown[] | undefined)?.[0] ?? {}) as {
    message?: {
      content?: unknown
      tool_calls?: { id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]
    }
    finish_reason?: unknown
  }
  const response = responseShell(request, newResponseId(), createdAt)
  const text = choice.message?.content
  if (typeof text === 'string' && text !== '')
    response.output.push(messageItem(newItemId('msg'), text))
  for (const call of choice.message?.tool_calls ?? [])
    response.output.push(functionCallItem(newItemId('fc'), { id: call.id, ...call.function }))
  // An answer cut short: its last item is.
  const last = response.output.at(-1)
  if (last) last.status = lastItemStatus(choice.finish_reason)
  Object.assign(response, finishStatus(choice.finish_reason))
  response.usage = responsesUsage(completion.usage)
  return response
}
