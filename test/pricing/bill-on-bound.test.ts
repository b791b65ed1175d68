/**
 * An answer without usage is billed on its prompt's bound and a token per byte it wrote
 * (src/pricing/bill-on-bound.ts): the bytes are counted in every shape an answer is kept in, so
 * a Response or an Anthropic message is not billed as if it wrote nothing.
 */
import { expect, test } from 'bun:test'
import { answerBytes, usageOnBound } from '../../src/pricing/bill-on-bound.ts'

test('a chat completion: its message contents and its tool calls’ arguments', () => {
  expect(
    answerBytes({
      choices: [
        { message: { content: 'héllo' } },
        { message: { content: null, tool_calls: [{ function: { arguments: '{"a":1}' } }] } },
      ],
    }),
  ).toBe(6 + 7)
})

test("a Response: its output text parts and function calls' arguments", () => {
  expect(
    answerBytes({
      object: 'response',
      output: [
        { type: 'message', content: [{ type: 'output_text', text: 'four' }] },
        { type: 'function_call', name: 'f', arguments: '{"q":"x"}' },
      ],
    }),
  ).toBe(4 + 9)
})

test('an Anthropic message: its text blocks and tool inputs as JSON', () => {
  expect(
    answerBytes({
      type: 'message',
      content: [
        { type: 'text', text: 'abc' },
        { type: 'tool_use', id: 't', name: 'f', input: { q: 1 } },
      ],
    }),
  ).toBe(3 + 7)
})

test('embeddings and odd shapes count nothing; the output bound caps the bill', () => {
  expect(answerBytes({ data: [{ embedding: [0.1] }] })).toBe(0)
  expect(answerBytes({ choices: 'x', output: 5, content: [1] })).toBe(0)
  expect(usageOnBound({ input: 10, output: 4 }, 100)).toEqual({
    input_tokens: 10,
    output_tokens: 4,
  })
})
