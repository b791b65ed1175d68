/**
 * A Message Batches create (`{"requests": [{"custom_id", "params"}]}`) → the native JSONL file it
 * amounts to (docs/clients/anthropic-sdk.md): one `/v1/messages` line per request, its params as they came, in
 * order, so line N is request N-1 and the native admission validates (by the chat call it
 * translates to), prices and holds it as any other file. What cannot become a line is an issue of
 * its own; every one is reported at once, with the native issues' shape.
 */
import { MESSAGES_URL } from '../../domain.ts'
import { excerpt } from '../../excerpt.ts'
import type { Issue } from '../../ingest/issues.ts'

/** Anthropic's rule for a batch request's custom_id. */
const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/

/** Begins the line's custom_id of a request whose own is not valid, which no valid one can. */
const PLACEHOLDER = '#'

export type MessageBatchFile =
  | {
      ok: true
      /**
       * The native file of the requests that could be translated, one line each. With issues it
       * is only checked, never submitted: the create is refused with them and what it finds.
       */
      bytes: Uint8Array
      /** Line N of `bytes` is request `requestIndex[N - 1]`. */
      requestIndex: number[]
      /** Each request's custom_id as its issues name it (an excerpt); null when not a string. */
      customIds: (string | null)[]
      /** What kept the other requests out, in request order. */
      issues: Issue[]
    }
  | { ok: false; envelope: string; issues?: Issue[] }

/** Where request `index`'s field sits in the caller's document. */
export const requestPath = (index: number, path: string) =>
  [`requests[${index}]`, path].filter(Boolean).join('.')

export function convertMessageBatch(body: unknown, maxRequests: number): MessageBatchFile {
  const requests = (body as { requests?: unknown } | null)?.requests
  const shape =
    '{"requests": [{"custom_id": "…", "params": {…a Messages request…}}, …]} with at least one request'
  if (!Array.isArray(requests) || requests.length === 0)
    return { ok: false, envelope: `the body must be ${shape}` }
  // As Anthropic refuses them: a field here would otherwise be dropped unread.
  const extra = Object.keys(body as object).find((name) => name !== 'requests')
  if (extra !== undefined)
    return {
      ok: false,
      envelope: `${excerpt(extra)}: this field is not accepted here; the body is ${shape}, nothing else`,
    }
  if (requests.length > maxRequests) {
    // As the native submit says it of a file with too many lines: an issue at the first one over.
    const fix = `split it into batches of at most ${maxRequests} requests and create each`
    return {
      ok: false,
      envelope: `a batch holds at most ${maxRequests} requests and this one has ${requests.length}; ${fix}`,
      issues: [
        {
          line: maxRequests + 1,
          custom_id: null,
          path: 'requests',
          message: `has more than ${maxRequests} requests`,
          fix,
        },
      ],
    }
  }
  const issues: Issue[] = []
  const seen = new Set<string>()
  const lines: string[] = []
  const requestIndex: number[] = []
  const customIds: (string | null)[] = []
  requests.forEach((request: { custom_id?: unknown; params?: unknown } | null, index) => {
    const customId = typeof request?.custom_id === 'string' ? request.custom_id : null
    const shownId = customId === null ? null : excerpt(customId)
    customIds.push(shownId)
    const issue = (path: string, message: string, fix: string) => {
      issues.push({
        line: index + 1,
        custom_id: shownId,
        path: requestPath(index, path),
        message,
        fix,
      })
    }
    const idValid = customId !== null && CUSTOM_ID.test(customId) && !seen.has(customId)
    if (customId === null || !CUSTOM_ID.test(customId))
      issue(
        'custom_id',
        'must be 1 to 64 letters, digits, "_" or "-"',
        'give every request a custom_id matching ^[a-zA-Z0-9_-]{1,64}$',
      )
    else if (seen.has(customId))
      issue(
        'custom_id',
        `repeats ${JSON.stringify(customId)}`,
        'give every request its own custom_id',
      )
    else seen.add(customId)
    if (typeof request === 'object' && request !== null)
      for (const name of Object.keys(request))
        if (name !== 'custom_id' && name !== 'params')
          issue(
            excerpt(name),
            'is not a field of a batch request',
            'send only custom_id and params; the Messages request itself goes in params',
          )
    const params = request?.params
    if (typeof params !== 'object' || params === null || Array.isArray(params))
      return issue(
        'params',
        'must be a JSON object: a Messages API request',
        'send {"model", "max_tokens", "messages", …} as params',
      )
    if ((params as { stream?: unknown }).stream === true)
      return issue(
        'params.stream',
        'a batch request cannot stream',
        'remove stream or set it to false',
      )
    // A request whose custom_id or fields are wrong still has its params checked, so that every
    // problem is told at once; its line carries an id no valid custom_id can equal (PLACEHOLDER).
    requestIndex.push(index)
    lines.push(
      JSON.stringify({
        custom_id: idValid ? customId : `${PLACEHOLDER}${index}`,
        method: 'POST',
        url: MESSAGES_URL,
        body: params,
      }),
    )
  })
  const bytes = new TextEncoder().encode(lines.join('\n'))
  return { ok: true, bytes, requestIndex, customIds, issues }
}

/**
 * A native issue about line N of the file (`body.…`) in the words of the create: request
 * `requestIndex[N - 1]` (`requests[i].params.…`), numbered from 1 as `line`, named by its own
 * custom_id (also one that is not valid, which its line could not carry).
 */
export function inRequestTerms(
  issue: Issue,
  { requestIndex, customIds }: Pick<MessageBatchFile & { ok: true }, 'requestIndex' | 'customIds'>,
): Issue {
  const index = requestIndex[issue.line - 1] ?? issue.line - 1
  const path = issue.path.replace(/^body(?=\.|$)/, 'params').replace(/^url$/, '')
  const custom_id = issue.custom_id?.startsWith(PLACEHOLDER)
    ? (customIds[index] ?? null)
    : issue.custom_id
  return { ...issue, custom_id, line: index + 1, path: requestPath(index, path) }
}
