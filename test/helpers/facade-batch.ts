/**
 * A batch made on the OpenAI facade the way a raw client makes one (docs/openai-facade.md): the
 * JSONL uploaded with files.create's multipart form, then a batch created from the file.
 */
import type { TestGateway } from './gateway.ts'

export async function createFacadeBatch(
  gw: Pick<TestGateway, 'request'>,
  key: string,
  file: string,
): Promise<{ id: string; status: string; input_file_id: string }> {
  const form = new FormData()
  form.set('purpose', 'batch')
  form.set('file', new Blob([file]), 'in.jsonl')
  const uploaded = (await (
    await gw.request('/openai/v1/files', key, { method: 'POST', body: form })
  ).json()) as { id: string }
  const created = await gw.request('/openai/v1/batches', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      input_file_id: uploaded.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    }),
  })
  return (await created.json()) as { id: string; status: string; input_file_id: string }
}
