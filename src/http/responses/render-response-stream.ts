/**
 * chat.completion.chunk objects → the Responses API's stream events (docs/clients/responses.md), in OpenAI's
 * order, each with its sequence_number: response.created, response.in_progress; per text item
 * response.output_item.added, response.content_part.added, response.output_text.delta…,
 * response.output_text.done, response.content_part.done, response.output_item.done; per tool
 * call response.output_item.added, response.function_call_arguments.delta…,
 * response.function_call_arguments.done, response.output_item.done; then response.completed
 * (or response.incomplete when the answer was cut at max_output_tokens); an upstream that broke
 * off ends it with an `error` event (brokenOffEvent).
 */
import type { Usage } from '../../../providers/types.ts'
import type { StreamRender } from '../live.ts'
import {
  finishStatus,
  inputDetails,
  lastItemStatus,
  functionCallItem,
  messageItem,
  newItemId,
  newResponseId,
  responseShell,
  textPart,
} from '../../../providers/responses/convert-chat-to-response.ts'

interface ToolDelta {
  index?: number
  id?: string
  function?: { name?: string; arguments?: string }
}

type Open =
  | { kind: 'text'; id: string; index: number; text: string }
  | {
      kind: 'call'
      id: string
      index: number
      callIndex: number
      callId: string
      name: string
      args: string
    }

export function responseStreamRender(request: Record<string, unknown>): StreamRender {
  const response = responseShell(request, newResponseId(), Math.floor(Date.now() / 1000))
  let sequence = 0
  let started = false
  let open: Open | null = null
  let finishReason: unknown = null
  /** Reasoning tokens, from the chunk that carries the usage (the gateway's Usage has none). */
  let reasoningTokens = 0
  const event = (type: string, data: Record<string, unknown>) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`

  const start = () => {
    started = true
    return event('response.created', { response }) + event('response.in_progress', { response })
  }
  const close = () => {
    if (!open) return ''
    const at = { item_id: open.id, output_index: open.index }
    let out: string
    let item: Record<string, unknown>
    if (open.kind === 'text') {
      // Closed by the end (finishReason known) or by the next item (whole).
      item = messageItem(open.id, open.text, lastItemStatus(finishReason))
      out =
        event('response.output_text.done', {
          ...at,
          content_index: 0,
          text: open.text,
          logprobs: [],
        }) +
        event('response.content_part.done', { ...at, content_index: 0, part: textPart(open.text) })
    } else {
      item = functionCallItem(
        open.id,
        { id: open.callId, name: open.name, arguments: open.args },
        lastItemStatus(finishReason),
      )
      out = event('response.function_call_arguments.done', { ...at, arguments: open.args })
    }
    response.output.push(item)
    open = null
    return out + event('response.output_item.done', { output_index: at.output_index, item })
  }
  const openText = () => {
    const text = close()
    const id = newItemId('msg')
    open = { kind: 'text', id, index: response.output.length, text: '' }
    const item = { ...messageItem(id, '', 'in_progress'), content: [] }
    return (
      text +
      event('response.output_item.added', { output_index: open.index, item }) +
      event('response.content_part.added', {
        item_id: id,
        output_index: open.index,
        content_index: 0,
        part: textPart(''),
      })
    )
  }
  const openCall = (call: ToolDelta) => {
    const text = close()
    const id = newItemId('fc')
    const callId = call.id ?? id
    const name = call.function?.name ?? ''
    open = {
      kind: 'call',
      id,
      index: response.output.length,
      callIndex: call.index ?? 0,
      callId,
      name,
      args: '',
    }
    const item = functionCallItem(id, { id: callId, name, arguments: '' }, 'in_progress')
    return text + event('response.output_item.added', { output_index: open.index, item })
  }

  return {
    chunk(value) {
      let out = started ? '' : start()
      const usage = value.usage as
        { completion_tokens_details?: { reasoning_tokens?: unknown } } | null | undefined
      const reasoning = usage?.completion_tokens_details?.reasoning_tokens
      if (typeof reasoning === 'number') reasoningTokens = reasoning
      const choice = (value.choices as Record<string, unknown>[] | undefined)?.[0]
      if (!choice) return out
      const delta = (choice.delta ?? {}) as { content?: unknown; tool_calls?: ToolDelta[] }
      if (typeof delta.content === 'string' && delta.content !== '') {
        if (open?.kind !== 'text') out += openText()
        const current = open as Extract<Open, { kind: 'text' }>
        current.text += delta.content
        out += event('response.output_text.delta', {
          item_id: current.id,
          output_index: current.index,
          content_index: 0,
          delta: delta.content,
          logprobs: [],
        })
      }
      for (const call of delta.tool_calls ?? []) {
        if (open?.kind !== 'call' || open.callIndex !== (call.index ?? 0)) out += openCall(call)
        const current = open as unknown as Extract<Open, { kind: 'call' }>
        const args = call.function?.arguments
        if (args) {
          current.args += args
          out += event('response.function_call_arguments.delta', {
            item_id: current.id,
            output_index: current.index,
            delta: args,
          })
        }
      }
      if (choice.finish_reason) finishReason = choice.finish_reason
      return out
    },
    end(usage: Usage | null) {
      const head = (started ? '' : start()) + close()
      const finish = finishStatus(finishReason)
      Object.assign(response, finish)
      const input = usage?.input_tokens ?? 0
      const output = usage?.output_tokens ?? 0
      response.usage = {
        input_tokens: input,
        input_tokens_details: inputDetails(
          usage?.cached_input_tokens,
          (usage?.cache_write_tokens ?? 0) + (usage?.cache_write_1h_tokens ?? 0),
        ),
        output_tokens: output,
        output_tokens_details: { reasoning_tokens: reasoningTokens },
        total_tokens: input + output,
      }
      const type = finish.status === 'completed' ? 'response.completed' : 'response.incomplete'
      return head + event(type, { response })
    },
    broken: () => brokenOffEvent(sequence++),
  }
}

/**
 * The event that ends a Responses stream the upstream broke off, translated or passed through:
 * OpenAI's `error`, numbered next after the last event sent. The openai SDK's stream raises it as
 * an APIError; a `response.failed` it takes as a clean end, and finalResponse() would resolve the
 * failed Response as the answer. The items begun stay unfinished, as a passed-through stream
 * leaves them: its upstream never finished them.
 */
export function brokenOffEvent(sequence: number): string {
  const error = {
    type: 'error',
    code: 'server_error',
    message: 'the upstream stream broke off',
    param: null,
    sequence_number: sequence,
  }
  return `event: error\ndata: ${JSON.stringify(error)}\n\n`
}
