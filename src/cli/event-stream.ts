/**
 * Server-sent events read the way EventSource reads them (the WHATWG parsing rules, minus
 * reconnection, which the caller does with the last id): for the CLI's `--wait` on a batch's
 * progress stream (docs/events-and-webhooks.md).
 */

export interface StreamEvent {
  id: string | null
  event: string
  data: string
}

/** The events of `body` as they arrive; comments are skipped. Ends when the body ends. */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamEvent> {
  const decoder = new TextDecoder()
  let buffer = ''
  let id: string | null = null
  let event = ''
  let data: string[] = []
  const reader = body.getReader()
  try {
    for (;;) {
      const chunk = await reader.read()
      // At the end, a CR held back below is a line end after all.
      if (chunk.done) buffer += buffer.endsWith('\r') ? '\n' : ''
      else buffer += decoder.decode(chunk.value, { stream: true })
      let newline: number
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A CR last in the chunk may be the first half of a CRLF: wait for the next byte.
        if (!chunk.done && buffer[newline] === '\r' && newline === buffer.length - 1) break
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1))
        if (line === '') {
          if (data.length > 0) yield { id, event: event || 'message', data: data.join('\n') }
          event = ''
          data = []
          continue
        }
        if (line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'id') id = value
        else if (field === 'event') event = value
        else if (field === 'data') data.push(value)
      }
      if (chunk.done) return
    }
  } finally {
    reader.releaseLock()
  }
}
