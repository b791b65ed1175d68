/** Reading a server-sent event stream as it arrives, the way EventSource parses it, bounded in time. */

export interface SseEvent {
  id: string | null
  event: string
  data: string
  /** When the event's blank line arrived (Date.now()). */
  at: number
}

export interface SseReader {
  /** The next event (comments are counted, not returned); null once the stream has ended. */
  next(timeoutMs?: number): Promise<SseEvent | null>
  /** Comment lines seen so far (": keep-alive"). */
  comments: string[]
  /** Whether the server ended the stream. */
  ended(): boolean
  cancel(): Promise<void>
}

export function readSse(response: Response): SseReader {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  let done = false
  const comments: string[] = []
  const queue: SseEvent[] = []
  let pending: ReturnType<typeof reader.read> | null = null

  function parse() {
    for (;;) {
      const end = buffer.indexOf('\n\n')
      if (end < 0) return
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      let id: string | null = null
      let event = 'message'
      const data: string[] = []
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) comments.push(line.slice(1).trim())
        else if (line.startsWith('id:')) id = line.slice(3).trim()
        else if (line.startsWith('event:')) event = line.slice(6).trim()
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
      }
      if (data.length > 0) queue.push({ id, event, data: data.join('\n'), at: Date.now() })
    }
  }

  return {
    comments,
    ended: () => done,
    async next(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs
      while (queue.length === 0 && !done) {
        const left = deadline - Date.now()
        if (left <= 0) throw new Error(`no event within ${timeoutMs} ms`)
        let timer: ReturnType<typeof setTimeout> | undefined
        // A read that outlives a timeout is kept for the next call: its chunk is not lost.
        pending ??= reader.read()
        const chunk = await Promise.race([
          pending,
          new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), left))),
        ])
        clearTimeout(timer)
        if (chunk === 'timeout') continue
        pending = null
        if (chunk.done) done = true
        else buffer += decoder.decode(chunk.value, { stream: true })
        parse()
      }
      return queue.shift() ?? null
    },
    async cancel() {
      await reader.cancel().catch(() => {})
    },
  }
}

/** Every event until the stream ends (or `timeoutMs` passes). */
export async function readAll(sse: SseReader, timeoutMs = 60_000): Promise<SseEvent[]> {
  const deadline = Date.now() + timeoutMs
  const events: SseEvent[] = []
  for (;;) {
    const event = await sse.next(Math.max(1, deadline - Date.now()))
    if (!event) return events
    events.push(event)
  }
}
