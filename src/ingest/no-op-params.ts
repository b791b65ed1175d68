/**
 * A request parameter at OpenAI's own default changes no answer, so a model that does not take
 * the parameter is not refused for it: OpenAI itself accepts `temperature: 1` on a reasoning
 * model ("only the default (1) value is supported"), and clients send defaults unasked (older
 * LangChain sends `frequency_penalty: 0`, `presence_penalty: 0`, `n: 1`, `top_p: 1`).
 */
const DEFAULTS: Readonly<Record<string, unknown>> = {
  n: 1,
  temperature: 1,
  top_p: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
  logprobs: false,
}

/** Whether a body's field sets nothing: absent, null, or at OpenAI's default. */
export function setsNothing(field: string, value: unknown): boolean {
  if (value === undefined || value === null || DEFAULTS[field] === value) return true
  // No token's bias changed.
  return field === 'logit_bias' && isEmptyObject(value)
}

const isEmptyObject = (value: unknown) =>
  typeof value === 'object' && !Array.isArray(value) && Object.keys(value as object).length === 0
