/**
 * The chat body a live call in a provider's own API (the Responses API, Anthropic's Messages) is
 * validated, priced and held by (NativeCall), by the rule of catalog/speaks-api.ts (chatBodyFor);
 * a request no offering of its model can take is the refusal its translation gave.
 */
import type { PassThrough } from '../../providers/types.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { chatBodyFor } from '../catalog/speaks-api.ts'
import { GatewayError } from '../errors.ts'

export function translateCall(
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  request: { model: unknown; api: PassThrough },
  translate: (lenient: boolean) => Record<string, unknown> | GatewayError,
): { chat: Record<string, unknown>; untranslated?: GatewayError } {
  const body = chatBodyFor(catalog, request, translate, isRefusal)
  if (body instanceof GatewayError) throw body
  return body
}

const isRefusal = (translated: unknown): translated is GatewayError =>
  translated instanceof GatewayError
