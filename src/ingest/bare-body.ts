/**
 * A batch line that is a request body alone (`{"model": …, "messages": …}`), as a newcomer
 * writes who has called the API live: one issue saying to wrap it, instead of the envelope's
 * four missing fields and its unknown ones.
 */
import type { Catalog } from '../catalog/catalog.ts'
import { ENDPOINT_URLS, isBatchUrl, RESPONSES_URL } from '../domain.ts'
import type { BodyProblem } from './issues.ts'

/** What a request body has at its top that a batch line's envelope does not. */
const BODY_FIELDS = ['model', 'messages', 'input']
const ENVELOPE_FIELDS = ['custom_id', 'method', 'url']

/**
 * The issue for a line with no `body` and a request's own fields at its top, or null for any
 * other line. The url it suggests is the one the body reads as: `messages` a chat request,
 * `input` for an embeddings model an embeddings request, `input` for another a Responses one.
 */
export function bareBodyProblem(
  record: Record<string, unknown>,
  catalog: Catalog,
): BodyProblem | null {
  if ('body' in record || !BODY_FIELDS.some((field) => field in record)) return null
  const url = urlOf(record, catalog)
  const atTop = BODY_FIELDS.filter((field) => field in record).join(', ')
  if (ENVELOPE_FIELDS.some((field) => field in record))
    return {
      path: '',
      message: `has the request's ${atTop} at its top, outside body`,
      fix: `move the request's fields into body: {"custom_id": "…", "method": "POST", "url": "${url}", "body": {"model": …, …}}`,
    }
  return {
    path: '',
    message: 'is a request body alone: a batch line wraps it with a custom_id, method and url',
    fix:
      `write the line as {"custom_id": "request-1", "method": "POST", "url": "${url}", "body": <this line>}, ` +
      `with a custom_id of its own on each line; for a whole file of bodies: jq -nc '[inputs] | to_entries[] | ` +
      `{custom_id: "request-\\(.key + 1)", method: "POST", url: "${url}", body: .value}' bodies.jsonl > requests.jsonl`,
  }
}

function urlOf(record: Record<string, unknown>, catalog: Catalog): string {
  if (isBatchUrl(record.url)) return record.url
  if ('messages' in record) return ENDPOINT_URLS.chat
  const named = typeof record.model === 'string' ? record.model : ''
  const model = named ? catalog.find(named) : undefined
  // An unknown model is taken for an embeddings one by its name (text-embedding-3-small, …).
  const embeddings = model
    ? model.endpoints.includes('embeddings') && !model.endpoints.includes('chat')
    : /embed/i.test(named)
  if (embeddings) return ENDPOINT_URLS.embeddings
  return 'input' in record ? RESPONSES_URL : ENDPOINT_URLS.chat
}
