import { describe, expect, test } from 'bun:test'
import { batchLaneOpen, batchLaneSettings, BATCH_API_CAPS } from '../../src/catalog/batch-lane.ts'
import { checkCatalog } from '../../src/catalog/catalog-file.ts'
import { oneLaneCatalog } from '../helpers/lane-catalog.ts'

const catalog = oneLaneCatalog

describe('batch-lane offerings in the catalog (docs/batch-lanes.md)', () => {
  test('the settings default to 1,000 lines, 4 h left, 2 h fallback, 60 s polls', () => {
    const settings = batchLaneSettings({}, 'openai')
    expect(settings).toEqual({
      chunkLines: 1000,
      minLeftMs: 4 * 3_600_000,
      fallbackMs: 2 * 3_600_000,
      pollMs: 60_000,
      maxLines: 50_000,
      maxBytes: 200 * 1024 * 1024,
    })
    expect(BATCH_API_CAPS.anthropic).toEqual({ lines: 100_000, bytes: 256 * 1024 * 1024 })
  })

  test('hours may be fractional and are read as set', () => {
    const settings = batchLaneSettings(
      { chunk_lines: 250, min_hours_left: 0.5, fallback_hours: 0.25, poll_s: 1.5 },
      'anthropic',
    )
    expect(settings.chunkLines).toBe(250)
    expect(settings.minLeftMs).toBe(1_800_000)
    expect(settings.fallbackMs).toBe(900_000)
    expect(settings.pollMs).toBe(1500)
  })

  test('a line may go to the lane only with min_hours_left left and before deadline − fallback', () => {
    const settings = batchLaneSettings({ min_hours_left: 4, fallback_hours: 2 }, 'openai')
    const deadline = 100 * 3_600_000
    expect(batchLaneOpen(settings, deadline, deadline - 5 * 3_600_000)).toBe(true)
    expect(batchLaneOpen(settings, deadline, deadline - 4 * 3_600_000)).toBe(true)
    expect(batchLaneOpen(settings, deadline, deadline - 3.9 * 3_600_000)).toBe(false)
    const late = batchLaneSettings({ min_hours_left: 0, fallback_hours: 2 }, 'openai')
    expect(batchLaneOpen(late, deadline, deadline - 2.1 * 3_600_000)).toBe(true)
    expect(batchLaneOpen(late, deadline, deadline - 2 * 3_600_000)).toBe(false)
  })

  test('the fields belong to batch lanes only, and chunk_lines stays within the cap', () => {
    const onLive = checkCatalog(catalog({ lane: 'flex', chunk_lines: 10, poll_s: 5 }))
    expect(onLive).toContain(
      'models[0].offerings[1].chunk_lines: only a "lane": "batch" offering takes chunk_lines',
    )
    expect(onLive).toContain(
      'models[0].offerings[1].poll_s: only a "lane": "batch" offering takes poll_s',
    )
    const tooBig = checkCatalog(catalog({ lane: 'batch', chunk_lines: 60_000 }))
    expect(tooBig).toContain(
      "models[0].offerings[1].chunk_lines: openai's batch API takes at most 50000 lines a batch; set 50000 or less",
    )
    expect(
      checkCatalog(catalog({ lane: 'batch', chunk_lines: 60_000 }, 'anthropic')),
    ).not.toContain(expect.stringContaining('chunk_lines'))
  })

  test('a batch lane beside a live offering is accepted; alone it is refused with the fix', () => {
    expect(checkCatalog(catalog({ lane: 'batch' }))).toEqual([])
    expect(() => catalog({ lane: 'batch', chunk_lines: 0 })).toThrow()
    const alone = oneLaneCatalog({ lane: 'batch' }, 'openai', false)
    expect(checkCatalog(alone)).toEqual([
      'models[0].offerings: a batch lane needs a "live" or "flex" offering beside it, for live calls and the fallback before the deadline; add one',
    ])
  })
})
