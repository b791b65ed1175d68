/** The CLI's reading of server-sent events (src/cli/event-stream.ts), by the WHATWG parsing rules. */
import { expect, test } from 'bun:test'
import { readEvents } from '../../src/cli/event-stream.ts'

/** A body that arrives in the given pieces, split wherever they say. */
const body = (...pieces: string[]) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(new TextEncoder().encode(piece))
      controller.close()
    },
  })

const all = async (stream: ReadableStream<Uint8Array>) => {
  const events = []
  for await (const event of readEvents(stream)) events.push(event)
  return events
}

test('events with ids and names, comments skipped, split anywhere across chunks', async () => {
  const text =
    ': resumed\n\nid: 3\nevent: batch\ndata: {"a":1}\n\n: keep-alive\n\nid: 7\nevent: batch\ndata: {"a":2}\n\n'
  const whole = await all(body(text))
  expect(whole).toEqual([
    { id: '3', event: 'batch', data: '{"a":1}' },
    { id: '7', event: 'batch', data: '{"a":2}' },
  ])
  // One byte at a time gives the same events.
  expect(await all(body(...text.split('')))).toEqual(whole)
})

test('CRLF and CR line ends, several data lines, no space after the colon, the id kept', async () => {
  const text = 'id:1\r\ndata:first\r\ndata: second\r\n\r\ndata: third\r\r'
  const expected = [
    { id: '1', event: 'message', data: 'first\nsecond' },
    { id: '1', event: 'message', data: 'third' },
  ]
  expect(await all(body(text))).toEqual(expected)
  // A CRLF split between two chunks is one line end, not two.
  expect(await all(body(...text.split('')))).toEqual(expected)
})

test('an event cut off before its blank line is not given', async () => {
  expect(await all(body('id: 1\nevent: batch\ndata: {"partial"'))).toEqual([])
})
