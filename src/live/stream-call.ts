/**
 * A streamed live chat call (docs/live.md): held as a whole call is, each chunk written as it
 * arrives, settled when the usage arrives. A stream that ended without usage is billed on the
 * bound (as a whole answer is); one that broke or was abandoned settles what the upstream
 * reported by then, or gives the hold back when it reported nothing.
 */
import type { Usage } from '../../providers/types.ts'
import { offeringSpeaks } from '../catalog/speaks-api.ts'
import { streamWithFallback } from '../upstream/send-with-fallback.ts'
import { holdCall, type HeldCall } from './hold-call.ts'
import type { LiveDeps, LiveInput, StreamRender } from './live-types.ts'
import { releaseCall, settleCall, usageOnCallBound } from './settle-call.ts'
import { upstreamFailure } from './upstream-failure.ts'
import { limitsOf } from '../catalog/catalog-file.ts'

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
  try {
    const { outcome, offering, done } = await streamWithFallback(deps.upstreams, {
      endpoint: 'chat',
      body: held.body,
      passThrough: native,
      offerings: held.offerings,
      modelLimits: limitsOf(held.model),
      signal: request.signal,
      fineTune: held.fineTune,
    })
    if (!outcome.ok) throw upstreamFailure(outcome.error)
    // In the surface's own API: its events as they came, or translated from chat chunks.
    const render = native
      ? native.streamRender(offeringSpeaks(deps.catalog, offering, native.api))
      : openAiSse(streamOptions(input.raw)?.include_usage === true)
    streaming = true
    const progress = { ended: false, outputBytes: 0 }
    outcome.usage
      .then((usage) => {
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
      .finally(done)
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
    if (!streaming) release(deps, held, undefined)
  }
}

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
    progress: { ended: boolean; outputBytes: number }
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

/** UTF-8 bytes of the content deltas of one streamed chunk. */
function deltaBytes(chunk: Record<string, unknown>): number {
  let bytes = 0
  for (const choice of (chunk.choices as { delta?: { content?: unknown } }[] | undefined) ?? []) {
    if (typeof choice.delta?.content === 'string')
      bytes += Buffer.byteLength(choice.delta.content, 'utf8')
  }
  return bytes
}
