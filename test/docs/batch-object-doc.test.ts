/**
 * The batch object shown in docs/native-api.md has every field the gateway's answers carry, and
 * no other: its top-level keys are the keys of the schema every native batch answer is rendered
 * to (src/schemas/native-objects.ts). A field added to the answer and not to the page fails here.
 */
import { expect, test } from 'bun:test'
import { batchObjectSchema } from '../../src/schemas/native-objects.ts'
import { readDoc, sectionBlocks } from '../helpers/doc-blocks.ts'

/** The keys of the outermost object in `text`, a JSON-like example that may hold `…` for values. */
function topLevelKeys(text: string): string[] {
  const keys: string[] = []
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const char = text[i]
    if (char === '"') {
      const end = text.indexOf('"', i + 1)
      if (depth === 1 && /^\s*:/.test(text.slice(end + 1))) keys.push(text.slice(i + 1, end))
      i = end
    } else if (char === '{' || char === '[') depth++
    else if (char === '}' || char === ']') depth--
  }
  return keys
}

test('the batch object of docs/native-api.md shows exactly the fields of a native batch answer', () => {
  const [example] = sectionBlocks(readDoc('docs/native-api.md'), '## The batch object', 'json')
  const shown = topLevelKeys(example!)
  expect(shown.length).toBeGreaterThan(10)
  expect(shown.toSorted()).toEqual(Object.keys(batchObjectSchema.shape).toSorted())
})
