/**
 * The progress stream served by another instance than the one dispatching (docs/events-and-webhooks.md): two
 * gateway processes on one PostgreSQL and Redis, the first without a dispatcher and with a
 * 60-second poll, so every event it sends before then was learnt from the other instance's
 * NOTIFY; then a resume on the other instance.
 */
import { expect, test } from 'bun:test'
import { chatLine, jsonl } from '../helpers/gateway.ts'
import { readAll, readSse } from '../helpers/sse.ts'
import { FINAL_BATCH } from '../helpers/wait.ts'
import { describeScale, withSimFleet, type Batch } from './fleet.ts'

describeScale('scale: progress stream across instances', () => {
  test('an instance that does not dispatch streams every change the other one makes, in order, to the end', async () => {
    // Two lines at a time for 300 ms each: 10 lines run ~1.5 s.
    await withSimFleet(
      { latencyMs: 300 },
      {
        instances: 2,
        maxConcurrency: 2,
        env: { MULTIGRID_POLL_MS: '50' },
        envOf: (index): Record<string, string> =>
          index === 0 ? { MULTIGRID_DISPATCH: '0', MULTIGRID_EVENTS_POLL_MS: '60000' } : {},
      },
      async (fleet) => {
        const { key } = await fleet.newAccount('5')
        const lines = Array.from({ length: 10 }, (_, i) => chatLine(`f-${i}`, `line ${i}`))
        const submitted = await fleet.submit(1, key, jsonl(lines))
        expect(submitted.status).toBe(201)
        const { id } = (await submitted.json()) as Batch
        const headers = { authorization: `Bearer ${key}` }

        const startedAt = Date.now()
        const response = await fetch(`${fleet.urls[0]}/v1/batches/${id}/events`, { headers })
        expect(response.status).toBe(200)
        const events = await readAll(readSse(response), 30_000)
        // Far sooner than the streaming instance's own 60 s poll: the changes came by NOTIFY.
        expect(Date.now() - startedAt).toBeLessThan(20_000)
        const batches = events.map((event) => JSON.parse(event.data) as Batch)
        expect(batches.length).toBeGreaterThanOrEqual(3)
        const done = (b: Batch) =>
          b.request_counts.succeeded + b.request_counts.failed + b.request_counts.cancelled
        for (let i = 1; i < batches.length; i++) {
          expect(Number(events[i]!.id)).toBeGreaterThan(Number(events[i - 1]!.id))
          expect(done(batches[i]!)).toBeGreaterThanOrEqual(done(batches[i - 1]!))
        }
        expect(batches.at(-1)!.status).toBe('completed')
        expect(batches.slice(0, -1).every((b) => !FINAL_BATCH.includes(b.status))).toBe(true)
        expect(batches.at(-1)).toEqual(await fleet.batch(0, key, id))

        // The ids mean the same on every instance: resumed elsewhere from the middle, the end.
        const middle = events[Math.floor(events.length / 2)]!
        const resumed = await readAll(
          readSse(
            await fetch(`${fleet.urls[1]}/v1/batches/${id}/events`, {
              headers: { ...headers, 'last-event-id': middle.id! },
            }),
          ),
        )
        expect(resumed.map((event) => event.id)).toEqual([events.at(-1)!.id])
        const atEnd = await fetch(`${fleet.urls[1]}/v1/batches/${id}/events`, {
          headers: { ...headers, 'last-event-id': events.at(-1)!.id! },
        })
        expect(atEnd.status).toBe(204)
      },
    )
  }, 90_000)
})
