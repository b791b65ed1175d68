/**
 * A streamed live chat call (docs/live.md): held as a whole call is, each chunk written as it
 * arrives, settled when the usage arrives. A stream that ended without usage is billed on the
 * bound (as a whole answer is). One the client left after text reached it is billed what it was
 * sent, on the same bound where the upstream had not yet said (OpenAI reports usage last, so a
 * client that hangs up at the finish would otherwise get the whole answer free); one that broke
 * upstream, or was left before any text, settles what the upstream reported by then, or gives
 * the hold back when it reported nothing.
 */
import type { Usage } from '../../providers/types.ts'
import { offeringSpeaks } from '../catalog/speaks-api.ts'
import { streamWithFallback } from '../upstream/send-with-fallback.ts'
import { holdCall, type HeldCall } from './hold-call.ts'
import type { LiveDeps, LiveInput, StreamRender } from './live-types.ts'
import { releaseCall, settleCall, usageOnCallBound } from './settle-call.ts'
import { deltaBytes } from '../pricing/bill-on-bound.ts'
import { upstreamFailure } from './upstream-failure.ts'
import { limitsOf } from '../catalog/catalog-file.ts'
import { followAbort } from '../../providers/follow-abort.ts'

const encoder = new TextEncoder()

/**
 * The upstream is always asked for usage (billing needs it); the client gets the usage-only chunk
 * only when it asked (`stream_options.include_usage`), as OpenAI does: clients that read
 * `chunk.choices[0]` break on one they did not ask for.
 */
export const openAiSse = (wantsUsage: boolean): StreamRender => ({
  chunk: (value) => {
    if (wantsUsage) return `data: ${JSON.stringify(value)}\n\n`
    return isUsageOnly(value) ? '' : `data: ${JSON.stringify(withoutUsage(value))}\n\n`
  },
  end: () => 'data: [DONE]\n\n',
  broken: () =>
    `data: ${JSON.stringify({ error: { message: 'the upstream stream broke off', type: 'server_error', code: 'upstream_error', param: null } })}\n\n`,
})

/**
 * The call streamed with `headers`: OpenAI's chunks, or for a call in another API (NativeCall)
 * that API's events, as the answering offering sent them or translated from its chat chunks.
 */
export async function streamCall(
  deps: LiveDeps,
  call: { request: Request; headers: Record<string, string>; input: LiveInput },
): Promise<Response> {
  const { request, headers, input } = call
  const held = await holdCall(deps, input, 'chat')
  const native = input.passThrough
  let streaming = false
  const progress: Progress = { ended: false, abandoned: false, finished: false, outputBytes: 0 }
  // The upstream call ends when the client hangs up, unless the answer has finished: then the
  // rest (OpenAI's usage, after the finish) is still read, so the call is billed what it used.
  const upstream = new AbortController()
  const unfollow = followAbort(request.signal, () => {
    if (!progress.finished) return upstream.abort(request.signal.reason)
    // Read on by the body's cancel(); should that never come, the call ends here all the same.
    setTimeout(() => upstream.abort(request.signal.reason), AFTER_FINISH_MS + 500).unref()
  })
  try {
    const { outcome, offering, done } = await streamWithFallback(deps.upstreams, {
      endpoint: 'chat',
      body: held.body,
      passThrough: native,
      offerings: held.offerings,
      modelLimits: limitsOf(held.model),
      signal: upstream.signal,
      fineTune: held.fineTune,
    })
    if (!outcome.ok) throw upstreamFailure(outcome.error)
    // In the surface's own API: its events as they came, or translated from chat chunks.
    const render = native
      ? native.streamRender(offeringSpeaks(deps.catalog, offering, native.api))
      : openAiSse(streamOptions(input.raw)?.include_usage === true)
    streaming = true
    outcome.usage
      .then((usage) => {
        // A client that hangs up aborts the request too, which may break the upstream stream
        // before the body's cancel() is heard. Past the finish, the usage read is the answer's own.
        const left = progress.abandoned || request.signal.aborted
        if (left && progress.outputBytes > 0 && !(usage && progress.finished))
          return settleCall(deps, held, usageWhenLeft(held, usage, progress.outputBytes), offering)
        if (usage) return settleCall(deps, held, usage, offering)
        // The usage settles a few microtasks before pull() sees the end: decide after it.
        setImmediate(() => {
          if (!progress.ended) return releaseCall(deps, held)
          deps.logger.warn('live.no_usage', {
            provider: offering.provider,
            model: offering.upstream_model,
          })
          settleCall(deps, held, usageOnCallBound(held, progress.outputBytes), offering)
        })
      })
      .catch((reason) => release(deps, held, reason))
      .finally(() => {
        unfollow()
        done()
      })
    const sse = eventStream(deps, {
      chunks: outcome.chunks[Symbol.asyncIterator](),
      usage: outcome.usage,
      render,
      progress,
    })
    return new Response(sse, {
      headers: {
        ...headers,
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      },
    })
  } finally {
    if (!streaming) {
      unfollow()
      release(deps, held, undefined)
    }
  }
}

/** How far a stream got: written to its end, left by the client, past its finish, text sent. */
interface Progress {
  ended: boolean
  abandoned: boolean
  finished: boolean
  outputBytes: number
}

/** How long a stream left after its finish is still read for its usage. */
const AFTER_FINISH_MS = 2_000

function release(deps: LiveDeps, held: HeldCall, reason: unknown) {
  releaseCall(deps, held)
  if (reason !== undefined)
    deps.logger.warn('live.stream_settle_failed', { reason: String(reason) })
}

/** Each chunk is written as it arrives: no buffering between upstream and client. */
function eventStream(
  deps: LiveDeps,
  stream: {
    chunks: AsyncIterator<Record<string, unknown>>
    usage: Promise<Usage | null>
    render: StreamRender
    progress: Progress
  },
) {
  const { chunks, usage, render, progress } = stream
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        // Until something is written: a pull that enqueues nothing is not called again.
        for (;;) {
          const next = await chunks.next()
          if (next.done) {
            progress.ended = true
            const reported = await usage.catch(() => null)
            controller.enqueue(encoder.encode(render.end(reported)))
            controller.close()
            return
          }
          progress.outputBytes += deltaBytes(next.value)
          if (!progress.finished && finishes(next.value)) progress.finished = true
          const text = render.chunk(next.value)
          if (text) return controller.enqueue(encoder.encode(text))
        }
      } catch (reason) {
        controller.enqueue(encoder.encode(render.broken()))
        controller.close()
        deps.logger.warn('live.stream_broken', { reason: String(reason) })
      }
    },
    async cancel() {
      // The client hung up: set before return() settles the usage, which reads it.
      if (!progress.ended) progress.abandoned = true
      if (progress.finished && !progress.ended) await readOn(chunks, AFTER_FINISH_MS)
      await chunks.return?.()
    },
  })
}

const streamOptions = (raw: unknown) =>
  (raw as { stream_options?: { include_usage?: unknown } | null } | null)?.stream_options

/** The final chunk of a stream asked with `include_usage`: usage and no choices. */
const isUsageOnly = (chunk: Record<string, unknown>) =>
  Array.isArray(chunk.choices) && chunk.choices.length === 0 && chunk.usage != null

/** A chunk as a client that did not ask for usage gets it (some servers add usage to every chunk). */
function withoutUsage(chunk: Record<string, unknown>): Record<string, unknown> {
  if (!('usage' in chunk)) return chunk
  const { usage: _, ...rest } = chunk
  return rest
}

/**
 * A stream the client left after `outputBytes` of text reached it: the upstream's usage so far,
 * its output raised to the bound of what was sent (one token a byte, never past the call's output
 * bound), its input the prompt's bound where the upstream had not said.
 */
function usageWhenLeft(held: HeldCall, reported: Usage | null, outputBytes: number): Usage {
  const bound = usageOnCallBound(held, outputBytes)
  return {
    ...reported,
    input_tokens: reported?.input_tokens || bound.input_tokens,
    output_tokens: Math.max(reported?.output_tokens ?? 0, bound.output_tokens),
  }
}

/** Reads what is left of a stream nobody reads any more, for at most `ms` (its usage settles). */
async function readOn(chunks: AsyncIterator<unknown>, ms: number): Promise<void> {
  const until = performance.now() + ms
  for (let read = 0; read < 1_000; read++) {
    const left = until - performance.now()
    if (left <= 0) return
    let timer: ReturnType<typeof setTimeout> | undefined
    const late = new Promise<null>((resolve) => (timer = setTimeout(resolve, left, null)))
    const next = await Promise.race([chunks.next().catch(() => null), late])
    clearTimeout(timer)
    if (next === null || next.done) return
  }
}

/**
 * Whether a chunk finishes the answer, after which only its usage is still to come: a chat
 * chunk's finish_reason, Anthropic's message_delta, a Response's last event.
 */
function finishes(chunk: Record<string, unknown>): boolean {
  if (chunk.type === 'message_delta' || chunk.type === 'response.completed') return true
  if (chunk.type === 'response.incomplete') return true
  for (const choice of (chunk.choices as { finish_reason?: unknown }[] | undefined) ?? [])
    if (choice.finish_reason) return true
  return false
}
