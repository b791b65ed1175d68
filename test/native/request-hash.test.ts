/**
 * What an Idempotency-Key's request is hashed by (src/admission/request-hash.ts): a body, in
 * shared memory as a big one is, hashed a slice per turn of the event loop; options in any order.
 */
import { expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { bodyDigest, requestHash } from '../../src/admission/request-hash.ts'

test('a body in shared memory is hashed whole, a slice per turn: what was queued meanwhile runs before it ends', async () => {
  const body = new Uint8Array(new SharedArrayBuffer(3 * 1024 * 1024 + 5))
  for (let i = 0; i < body.length; i++) body[i] = (i * 31) & 0xff
  const order: string[] = []
  const digest = bodyDigest(body).then((hex) => {
    order.push('digest')
    return hex
  })
  setImmediate(() => order.push('queued'))
  expect(await digest).toBe(createHash('sha256').update(body).digest('hex'))
  expect(order).toEqual(['queued', 'digest'])
  expect(await bodyDigest(new Uint8Array(0))).toBe(createHash('sha256').digest('hex'))
})

test('options hash the same in any order; a body, an option or its value changed hashes otherwise', () => {
  const hash = requestHash('abc', { name: 'n', completion_window_hours: 24, max_cost_usd: null })
  expect(
    requestHash('abc', { max_cost_usd: undefined, completion_window_hours: 24, name: 'n' }),
  ).toBe(hash)
  expect(
    requestHash('abd', { name: 'n', completion_window_hours: 24, max_cost_usd: null }),
  ).not.toBe(hash)
  expect(
    requestHash('abc', { name: 'm', completion_window_hours: 24, max_cost_usd: null }),
  ).not.toBe(hash)
  expect(
    requestHash('abc', { name: 'n', completion_window_hours: 48, max_cost_usd: null }),
  ).not.toBe(hash)
  expect(
    requestHash(null, { name: 'n', completion_window_hours: 24, max_cost_usd: null }),
  ).not.toBe(hash)
})
