/**
 * The live call (docs/live.md): the caller authenticated before its body is read, the body
 * validated, priced and held (hold-call.ts), sent over the model's offerings, and settled from
 * usage when the answer arrives (settle-call.ts); a call that failed releases its hold. Streams:
 * stream-call.ts. The routes of every surface (chat, the Responses API, Anthropic's Messages)
 * parse and render around this.
 */
import type { Endpoint } from '../../providers/types.ts'
import { offeringSpeaks } from '../catalog/speaks-api.ts'
import { badRequest, refuse } from '../errors.ts'
import { readJsonBody } from '../ingest/read-body.ts'
import { COMMON_JSON_MISTAKES } from '../ingest/issues.ts'
import { sendWithFallback } from '../upstream/send-with-fallback.ts'
import { holdCall } from './hold-call.ts'
import type { LiveDeps, LiveInput } from './live-types.ts'
import { billedUsage, releaseCall, settleCall } from './settle-call.ts'
import { streamCall } from './stream-call.ts'
import { upstreamFailure } from './upstream-failure.ts'
import { limitsOf } from '../catalog/catalog-file.ts'

/**
 * Who is calling, and the body as JSON. `authorization` is the header's value, or what another
 * surface's key header amounts to.
 */
export async function readLiveInput(
  deps: Pick<LiveDeps, 'auth' | 'bodyLimit'>,
  request: Request,
  headers: Record<string, string>,
  authorization: string | null = request.headers.get('authorization'),
): Promise<LiveInput> {
  // The key first: an unknown caller's body is never read.
  const caller = await deps.auth.authenticate(authorization, 'inference', headers)
  const read = await readJsonBody(request, deps.bodyLimit)
  // A form (curl -F, a multipart upload) is not JSON at all: say what to send instead.
  if (!read.ok && request.headers.get('content-type')?.toLowerCase().startsWith('multipart/'))
    throw refuse(
      'unsupported_media_type',
      'this endpoint takes a JSON body, not a form upload: send the request as one JSON object with Content-Type: application/json',
      { param: 'content-type' },
    )
  if (!read.ok)
    throw badRequest(
      `the body is not valid JSON; send one JSON object, the request for this endpoint (${COMMON_JSON_MISTAKES})`,
    )
  if (read.value === undefined)
    throw badRequest('the body is empty; send one JSON object, the request for this endpoint')
  return { caller, raw: read.value }
}

/**
 * A whole answer: held, sent, settled; the upstream's object, which the route renders. A call in
 * a provider's own API gets its answer in that API's shape from whichever offering answered.
 */
export async function callLive(
  deps: LiveDeps,
  request: Request,
  input: LiveInput,
  endpoint: Endpoint,
): Promise<Record<string, unknown>> {
  const held = await holdCall(deps, input, endpoint)
  const native = input.passThrough
  try {
    // Once sent, the call runs to its end and is billed, whether or not its caller is still
    // there: the provider bills it either way. A caller that hangs up while it waits for a slot
    // takes it out of the queue unsent, and nothing is spent.
    const tried = await sendWithFallback(deps.upstreams, {
      endpoint,
      body: held.body,
      passThrough: native,
      offerings: held.offerings,
      modelLimits: limitsOf(held.model),
      waitSignal: request.signal,
      // A fine-tune may wait, slot taken, for a place on a replica to load into: that wait, with
      // nothing sent, follows the caller as before (a self-hosted pool bills no one per token).
      ...(held.fineTune && { signal: request.signal }),
      fineTune: held.fineTune,
    })
    if (!tried)
      throw refuse(
        'request_aborted',
        'the caller hung up while the request waited for a provider; nothing was sent or billed',
      )
    const { outcome, offering } = tried
    if (!outcome.ok) throw upstreamFailure(outcome.error)
    settleCall(deps, held, billedUsage(deps, held, outcome, offering), offering)
    // The object, not the upstream's own text in a Response: Elysia rebuilds a returned
    // Response to add the rate-limit headers, its body as a stream, and that cost more than
    // the serialization it saved (bench:proxy, issue 15). Nor as a string with its content
    // type: Bun's Response of the text cost as much as Response.json of the object (0.65
    // against 0.67 µs), so passing the text through saved nothing.
    if (native && !offeringSpeaks(deps.catalog, offering, native.api))
      return native.fromChat(outcome.body)
    return outcome.body
  } finally {
    // Failed upstream, or threw: the whole hold comes back (a settled one is left alone).
    releaseCall(deps, held)
  }
}

/** The live call itself (read, call, stream), for the live routes and the other surfaces' routes. */
export interface LiveService {
  readJson(
    request: Request,
    headers: Record<string, string>,
    authorization?: string | null,
  ): Promise<LiveInput>
  call(request: Request, input: LiveInput, endpoint: Endpoint): Promise<Record<string, unknown>>
  stream(request: Request, headers: Record<string, string>, input: LiveInput): Promise<Response>
}

export function liveService(deps: LiveDeps): LiveService {
  return {
    readJson: (request, headers, authorization) =>
      authorization === undefined
        ? readLiveInput(deps, request, headers)
        : readLiveInput(deps, request, headers, authorization),
    call: (request, input, endpoint) => callLive(deps, request, input, endpoint),
    stream: (request, headers, input) => streamCall(deps, { request, headers, input }),
  }
}
