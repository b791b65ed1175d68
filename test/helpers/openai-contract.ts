/**
 * Validates facade answers against OpenAI's published schemas (test/contracts, copied from the
 * OpenAI OpenAPI document). A null optional field counts as absent, as the live API sends them.
 * List items are checked one by one with the item schema (see `items`).
 */
import Ajv from 'ajv/dist/2020.js'
import schema from '../contracts/openai-batch-files.schema.json'

const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })
ajv.addSchema({ ...schema, $id: 'openai' })

const ITEMS: Record<string, string> = {
  ListBatchesResponse: 'Batch',
  ListFilesResponse: 'OpenAIFile',
}

/** Problems (empty when valid) of `value` against `$defs/<name>`; list items one by one. */
export function contractProblems(name: string, value: unknown): string[] {
  const item = ITEMS[name]
  if (
    item &&
    value &&
    typeof value === 'object' &&
    Array.isArray((value as { data?: unknown }).data)
  ) {
    const list = value as { data: unknown[] }
    return [
      ...checkOne(name, { ...list, data: [] }),
      ...list.data.flatMap((entry, index) =>
        checkOne(item, entry).map((p) => `${name}/data/${index}: ${p}`),
      ),
    ]
  }
  return checkOne(name, value)
}

function checkOne(name: string, value: unknown): string[] {
  const validate = ajv.getSchema(`openai#/$defs/${name}`)
  if (!validate) throw new Error(`no schema ${name}`)
  // Unset optional fields of the object are null; nested schemas allow null where they mean it.
  const required = new Set<string>(
    (schema.$defs as Record<string, { required?: string[] }>)[name]?.required ?? [],
  )
  const cleaned =
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).filter(([k, v]) => v !== null || required.has(k)))
      : value
  return validate(cleaned)
    ? []
    : (validate.errors ?? []).map((e) => `${name}${e.instancePath} ${e.message}`)
}

/** Which schema an answer of the facade must satisfy, by method, path and status. */
export function schemaFor(method: string, path: string, status: number): string | null {
  if (status >= 400) return 'ErrorResponse'
  if (/\/files\/[^/]+\/content$/.test(path)) return null
  if (/\/batches$/.test(path)) return method === 'GET' ? 'ListBatchesResponse' : 'Batch'
  if (/\/batches\/[^/]+(\/cancel)?$/.test(path)) return 'Batch'
  if (/\/files$/.test(path)) return method === 'GET' ? 'ListFilesResponse' : 'OpenAIFile'
  if (/\/files\/[^/]+$/.test(path)) return method === 'DELETE' ? 'DeleteFileResponse' : 'OpenAIFile'
  return null
}
