/**
 * A batch's output and error files on the OpenAI facade (docs/openai-facade.md): named after the
 * batch, so they need no lookup to find, and rendered from its results once it has ended with
 * lines of their kind. Every batch has them, whichever surface made it: a native or Message
 * Batches batch is a facade batch too, and its output_file_id there must be a file.
 */
import type { BatchRecord } from '../domain.ts'
import type { FileStore } from '../store/store.ts'

export const outputFileId = (batchId: string) => `file-${batchId.slice('batch_'.length)}-output`
export const errorFileId = (batchId: string) => `file-${batchId.slice('batch_'.length)}-errors`

/** Lists the batch's result files as its account's files (each shown once the batch ends). */
export async function registerResultFiles(
  store: Pick<FileStore, 'createFile'>,
  batch: BatchRecord,
): Promise<void> {
  for (const [id, kind, suffix] of [
    [outputFileId(batch.id), 'output', 'output'],
    [errorFileId(batch.id), 'error', 'errors'],
  ] as const) {
    await store.createFile({
      id,
      accountId: batch.accountId,
      purpose: 'batch_output',
      filename: `${batch.id}_${suffix}.jsonl`,
      bytes: null,
      createdAt: batch.createdAt,
      lastUsedAt: batch.createdAt,
      batchId: batch.id,
      kind,
    })
  }
}
