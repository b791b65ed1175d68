/** OpenAI's finish reasons, which the gateway's responses use. */
export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter'

/** A normalised finish reason with the vendor's own value kept beside it. */
export interface MappedStopReason {
  unified: FinishReason
  raw: string | null
}

const table: Record<string, FinishReason> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  // A server tool paused a long turn; the text so far is a complete answer for a batch line.
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
}

/** Anthropic stop_reason → OpenAI finish_reason; unknown or missing values read as 'stop'. */
export function mapAnthropicStopReason(raw: unknown): MappedStopReason {
  const value = typeof raw === 'string' ? raw : null
  return { unified: (value && table[value]) || 'stop', raw: value }
}
