/**
 * The simulated model: a reply that is a pure function of the request, and honest usage.
 *
 * Prompt tokens are ceil(UTF-8 bytes of all message texts / 4) + 3 per message, which never
 * exceeds the gateway's pessimistic bound (bytes + 4 per message + 3). Completion tokens are the
 * words produced, so they never exceed max_tokens per choice.
 */

/** One message reduced to what is counted: its role and its text. */
export interface MessageText {
  role: string
  text: string
}

export type ReplyEnd = 'stop' | 'length' | 'stop_sequence'

export interface Reply {
  text: string
  words: number
  end: ReplyEnd
  /** The stop sequence that ended the reply, when end is stop_sequence. */
  stopSequence: string | null
}

const encoder = new TextEncoder()

export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8')
}

export function hashText(text: string): string {
  return Bun.hash.wyhash(text).toString(16).padStart(16, '0')
}

/** The text of an OpenAI or Anthropic content value: a string or an array of parts/blocks. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  let text = ''
  for (const part of content) {
    if (typeof part !== 'object' || part === null) continue
    const block = part as Record<string, unknown>
    if (typeof block.text === 'string') text += block.text
    else if (block.type === 'tool_use') text += String(block.name) + JSON.stringify(block.input)
    else if (block.type === 'tool_result') text += contentText(block.content)
  }
  return text
}

/** OpenAI chat messages; tool calls count by name and arguments. */
export function openaiMessageTexts(messages: unknown[]): MessageText[] {
  return messages.map((message) => {
    const m = (typeof message === 'object' && message !== null ? message : {}) as Record<
      string,
      unknown
    >
    let text = contentText(m.content)
    if (Array.isArray(m.tool_calls)) {
      for (const call of m.tool_calls as { function?: { name?: string; arguments?: string } }[]) {
        text += (call.function?.name ?? '') + (call.function?.arguments ?? '')
      }
    }
    return { role: String(m.role), text }
  })
}

/** Anthropic messages; the top-level system prompt counts as one message. */
export function anthropicMessageTexts(system: unknown, messages: unknown[]): MessageText[] {
  const texts: MessageText[] = []
  const systemText = contentText(system)
  if (system !== undefined && system !== null) texts.push({ role: 'system', text: systemText })
  for (const message of messages) {
    const m = (typeof message === 'object' && message !== null ? message : {}) as Record<
      string,
      unknown
    >
    texts.push({ role: String(m.role), text: contentText(m.content) })
  }
  return texts
}

export function countPromptTokens(messages: MessageText[]): number {
  let bytes = 0
  for (const message of messages) bytes += utf8Bytes(message.text)
  return Math.ceil(bytes / 4) + 3 * messages.length
}

/** Hash of roles and texts, so the same prompt in either API shape gets the same key. */
export function promptKey(messages: MessageText[]): string {
  let joined = ''
  for (const message of messages) joined += message.role + '\u0000' + message.text + '\u0001'
  return hashText(joined)
}

export function countWords(text: string): number {
  let words = 0
  let inWord = false
  for (let i = 0; i < text.length; i++) {
    const space = text.charCodeAt(i) <= 32
    if (!space && !inWord) words++
    inWord = !space
  }
  return words
}

export interface ReplyInput {
  messages: MessageText[]
  key: string
  model: string
  choice: number
  maxTokens: number | null
  stop: string[]
}

/** The first `count` code points of `text`: a cut never leaves half a surrogate pair. */
function firstCodePoints(text: string, count: number): string {
  let end = 0
  for (let points = 0; points < count && end < text.length; points++) {
    const unit = text.charCodeAt(end)
    const pair = unit >= 0xd800 && unit <= 0xdbff && end + 1 < text.length
    end += pair && (text.charCodeAt(end + 1) & 0xfc00) === 0xdc00 ? 2 : 1
  }
  return text.slice(0, end)
}

/** "sim reply to <first 40 characters of the last user message> #<hash>", cut as a model would. */
export function makeReply(input: ReplyInput): Reply {
  let lastUser = ''
  for (let i = input.messages.length - 1; i >= 0; i--) {
    if (input.messages[i].role === 'user') {
      lastUser = input.messages[i].text
      break
    }
  }
  // Whitespace collapsed, so the word count is the number of space-separated pieces.
  const snippet = firstCodePoints(lastUser, 40).replace(/\s+/g, ' ').trim()
  const tag = hashText(`${input.key}\u0000${input.model}\u0000${input.choice}`).slice(0, 8)
  let text = snippet === '' ? `sim reply to #${tag}` : `sim reply to ${snippet} #${tag}`
  let end: ReplyEnd = 'stop'
  let stopSequence: string | null = null

  let cutAt = -1
  for (const sequence of input.stop) {
    if (sequence === '') continue
    const at = text.indexOf(sequence)
    if (at >= 0 && (cutAt < 0 || at < cutAt)) {
      cutAt = at
      stopSequence = sequence
    }
  }
  if (cutAt >= 0) {
    text = text.slice(0, cutAt)
    end = 'stop_sequence'
  }

  if (input.maxTokens !== null && countWords(text) > input.maxTokens) {
    text = text.split(' ').filter(Boolean).slice(0, Math.max(0, input.maxTokens)).join(' ')
    end = 'length'
    stopSequence = null
  }
  return { text, words: countWords(text), end, stopSequence }
}

/** A deterministic unit vector for an embedding input. */
export function embeddingVector(input: string, dims: number): number[] {
  let state = Number(Bun.hash.wyhash(input) & 0xffffffffn)
  const values = new Array<number>(dims)
  let norm = 0
  for (let i = 0; i < dims; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    values[i] = state / 2147483648 - 1
    norm += values[i] * values[i]
  }
  norm = Math.sqrt(norm) || 1
  for (let i = 0; i < dims; i++) values[i] = Math.round((values[i] / norm) * 1e6) / 1e6
  return values
}

export function encodeUtf8(text: string): Uint8Array {
  return encoder.encode(text)
}

/** The reply cut into one streamed delta per word, leading space attached; joins back exactly. */
export function streamPieces(text: string): string[] {
  const pieces: string[] = text.match(/\s*\S+/g) ?? []
  const trailing = text.slice(pieces.join('').length)
  if (trailing !== '') {
    if (pieces.length > 0) pieces[pieces.length - 1] += trailing
    else pieces.push(trailing)
  }
  return pieces
}
