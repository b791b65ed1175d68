/** Server-sent events from a byte stream (WHATWG HTML §9.2: event, data; comments ignored). */
export interface SseEvent {
  /** The `event:` field; null when absent (OpenAI sends data lines only). */
  event: string | null
  data: string
}

export async function* readSseEvents(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder()
  let buffer = ''
  let event: string | null = null
  let data: string[] = []

  function* lines(final: boolean): Generator<SseEvent> {
    let start = 0
    for (;;) {
      const newline = buffer.indexOf('\n', start)
      if (newline < 0) break
      let line = buffer.slice(start, newline)
      start = newline + 1
      if (line.endsWith('\r')) line = line.slice(0, -1)
      if (line === '') {
        if (data.length > 0) yield { event, data: data.join('\n') }
        event = null
        data = []
        continue
      }
      if (line.startsWith(':')) continue
      const colon = line.indexOf(':')
      const field = colon < 0 ? line : line.slice(0, colon)
      let value = colon < 0 ? '' : line.slice(colon + 1)
      if (value.startsWith(' ')) value = value.slice(1)
      if (field === 'data') data.push(value)
      else if (field === 'event') event = value
    }
    buffer = buffer.slice(start)
    // A last event without its blank line still counts when the stream ends cleanly.
    if (final && data.length > 0) {
      yield { event, data: data.join('\n') }
      data = []
    }
  }

  for await (const chunk of chunks) {
    buffer += decoder.decode(chunk, { stream: true })
    yield* lines(false)
  }
  buffer += decoder.decode()
  if (buffer !== '' && !buffer.endsWith('\n')) buffer += '\n'
  yield* lines(true)
}
