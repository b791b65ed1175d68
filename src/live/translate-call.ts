/**
 * The chat body a call in a provider's own API (the Responses API, Anthropic's Messages) is
 * validated, priced and held by (NativeCall): its translation for the common subset; else, when a
 * field lies outside it and the model has offerings that take the request as it came, the lenient
 * translation that only prices it, and the refusal that keeps the call to those offerings.
 */
import type { PassThrough } from '../../providers/types.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { spokenBySome } from '../catalog/speaks-api.ts'
import { GatewayError } from '../errors.ts'

export function translateCall(
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  request: { model: unknown; api: PassThrough },
  translate: (lenient: boolean) => Record<string, unknown> | GatewayError,
): { chat: Record<string, unknown>; untranslated?: GatewayError } {
  const strict = translate(false)
  if (!(strict instanceof GatewayError)) return { chat: strict }
  if (!spokenBySome(catalog, request.model, request.api)) throw strict
  const lenient = translate(true)
  if (lenient instanceof GatewayError) throw lenient
  return { chat: lenient, untranslated: strict }
}
