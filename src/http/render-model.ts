/**
 * A fine-tune as an OpenAI model object (`id`, `object`, `created`, `owned_by`) with its `parent`
 * and `status` (docs/open-models.md): what GET /v1/models lists for the caller and the admin API answers,
 * each adding its own fields after these.
 */
import type { FineTuneRecord } from '../catalog/fine-tunes.ts'

export function renderFineTuneModel(fineTune: FineTuneRecord) {
  return {
    id: fineTune.id,
    object: 'model' as const,
    created: fineTune.createdAt,
    owned_by: fineTune.accountId,
    parent: fineTune.baseModel,
    status: fineTune.status,
  }
}
