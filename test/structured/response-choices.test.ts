/**
 * A Responses line passed through (docs/clients/responses.md) is judged from its Response object: its message
 * text is the answer, a refusal is an answer too, and an answer cut at max_output_tokens is the
 * caller's to judge, as a chat choice cut at max_tokens is.
 */
import { expect, test } from 'bun:test'
import { answerChoices, judgeChoices } from '../../src/schemas/structured-answer.ts'

const response = (status: string, parts: Record<string, unknown>[]) => ({
  object: 'response',
  status,
  output: [{ type: 'message', role: 'assistant', content: parts }],
})
const text = (value: string) => ({ type: 'output_text', text: value, annotations: [] })

test("a Response's message text is judged as a chat choice's content", () => {
  const judge = (answer: Record<string, unknown>) =>
    judgeChoices('json_object', null, answerChoices(answer), null)
  expect(judge(response('completed', [text('{"a": '), text('1}')]))).toBeNull()
  expect(judge(response('completed', [text('not json')]))).toContain('is not JSON')
  expect(judge(response('completed', [{ type: 'refusal', refusal: 'no' }]))).toBeNull()
  // Cut at max_output_tokens: returned as it is.
  expect(judge(response('incomplete', [text('{"a": ')]))).toBeNull()
  // A Response with no message at all stopped on its own with nothing to judge as JSON.
  expect(judge({ object: 'response', status: 'completed', output: [] })).toContain('no content')
})
