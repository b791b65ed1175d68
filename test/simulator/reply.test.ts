import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import {
  countPromptTokens,
  countWords,
  makeReply,
  promptKey,
  streamPieces,
  utf8Bytes,
} from '../../src/simulator/reply.ts'

const message = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant'),
  text: fc.string({ unit: 'grapheme', maxLength: 200 }),
})

describe('the simulated model', () => {
  test('prompt tokens never exceed the gateway bound: bytes + 4 per message + 3', () => {
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 8 }), (messages) => {
        let bytes = 0
        for (const m of messages) bytes += utf8Bytes(m.text)
        expect(countPromptTokens(messages)).toBeLessThanOrEqual(bytes + 4 * messages.length + 3)
      }),
    )
  })

  test('a reply never has more words than max_tokens, and streams back to itself', () => {
    fc.assert(
      fc.property(
        fc.array(message, { minLength: 1, maxLength: 4 }),
        fc.option(fc.integer({ min: 0, max: 20 })),
        fc.array(fc.string({ minLength: 1, maxLength: 3 }), { maxLength: 2 }),
        (messages, maxTokens, stop) => {
          const key = promptKey(messages)
          const reply = makeReply({ messages, key, model: 'm', choice: 0, maxTokens, stop })
          expect(reply.words).toBe(countWords(reply.text))
          if (maxTokens !== null) expect(reply.words).toBeLessThanOrEqual(maxTokens)
          expect(streamPieces(reply.text).join('')).toBe(reply.text)
          // No code point cut in half; a prompt may hold U+FFFD itself, and its echo with it.
          if (!messages.some((m) => m.text.includes('\uFFFD'))) {
            expect(reply.text).not.toContain('\uFFFD')
          }
        },
      ),
    )
  })
})
