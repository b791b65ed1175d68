/**
 * Server-sent events read the way EventSource reads them (the WHATWG parsing rules, minus
 * reconnection, which the caller does with the last id): for the CLI's `--wait` on a batch's
 * progress stream (SPEC §15).
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
      if (chunk.done) return
      buffer += decoder.decode(chunk.value, { stream: true })
      let newline: number
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
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
    }
  } finally {
    reader.releaseLock()
  }
}
