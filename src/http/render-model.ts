/**
 * An adapter as an OpenAI model object (`id`, `object`, `created`, `owned_by`) with its `parent`
 * and `status` (docs/open-models.md): what GET /v1/models lists for the caller and the admin API answers,
 * each adding its own fields after these.
 */
import type { AdapterRecord } from '../catalog/adapters.ts'

export function renderAdapterModel(adapter: AdapterRecord) {
  return {
    id: adapter.id,
    object: 'model' as const,
    created: adapter.createdAt,
    owned_by: adapter.accountId,
    parent: adapter.baseModel,
    status: adapter.status,
  }
}
