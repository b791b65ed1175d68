/** Facts stated once (issue 15 item 8): endpoint URLs, open and ended statuses, the storable-text rule. */
import { describe, expect, test } from 'bun:test'
import { endpointOf } from '../../src/catalog/catalog.ts'
import {
  BATCH_STATUSES,
  BATCH_URLS,
  ENDED_BATCH_STATUSES,
  ENDPOINT_URLS,
  isBatchUrl,
  isOpenBatch,
  OPEN_BATCH_STATUSES,
} from '../../src/domain.ts'
import { STORABLE_TEXT, toStorable } from '../../src/schemas/text.ts'
import { storableString } from '../../src/store/postgres/storable.ts'
import { sqlWordList } from '../../src/store/sqlite/sql-word-list.ts'

describe('one source for each fact', () => {
  test('the endpoint table gives the batch URLs and maps each back to its endpoint', () => {
    // Responses lines run as the chat calls they translate to (docs/clients/responses.md).
    expect(BATCH_URLS).toEqual(['/v1/chat/completions', '/v1/embeddings', '/v1/responses'])
    expect(isBatchUrl('/v1/responses')).toBe(true)
    for (const [endpoint, url] of Object.entries(ENDPOINT_URLS)) {
      expect(isBatchUrl(url)).toBe(true)
      expect(endpointOf(url)).toBe(endpoint as keyof typeof ENDPOINT_URLS)
    }
    expect(isBatchUrl('/v1/completions')).toBe(false)
    expect(isBatchUrl(undefined)).toBe(false)
  })

  test('ended statuses are exactly the ones that are not open', () => {
    expect([...OPEN_BATCH_STATUSES, ...ENDED_BATCH_STATUSES].sort()).toEqual(
      [...BATCH_STATUSES].sort(),
    )
    for (const status of ENDED_BATCH_STATUSES) expect(isOpenBatch(status)).toBe(false)
    expect(ENDED_BATCH_STATUSES).toEqual(['completed', 'failed', 'cancelled', 'expired'])
  })

  test('SQL word lists are made from domain words only', () => {
    expect(sqlWordList(OPEN_BATCH_STATUSES)).toBe(
      "('validating', 'in_progress', 'finalizing', 'cancelling')",
    )
    expect(() => sqlWordList(["x'); DROP TABLE batches; --"])).toThrow('not a domain word')
    expect(() => sqlWordList(['In_Progress'])).toThrow()
  })

  test('the storable-text rule refuses and repairs the same characters', () => {
    for (const bad of ['a\u0000b', 'lone \ud800 half', '\udfff']) {
      expect(STORABLE_TEXT.test(bad)).toBe(false)
      const repaired = toStorable(bad)
      expect(STORABLE_TEXT.test(repaired)).toBe(true)
      expect(storableString(bad)).toBe(repaired)
    }
    for (const good of ['plain', 'emoji 😀 pairs pass', '']) {
      expect(STORABLE_TEXT.test(good)).toBe(true)
      expect(toStorable(good)).toBe(good)
    }
    expect(storableString(null)).toBeNull()
  })
})
