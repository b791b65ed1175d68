/**
 * The progress streams' slots at a stop (src/http/stream-slots.ts): close() ends the streams
 * open, and a stream asked for afterwards (a request accepted just before the listener closed)
 * is refused at once, so none holds the stop's drain open until it is cut.
 */
import { expect, test } from 'bun:test'
import { GatewayError } from '../../src/errors.ts'
import { createStreamSlots } from '../../src/http/stream-slots.ts'

test('after close, open streams are ended and no new one opens', async () => {
  const slots = createStreamSlots({ maxPerKey: 2 })
  const check = { id: 'key:k1', stillValid: async () => true }
  const open = await slots.open('k1', check)
  expect(open.signal.aborted).toBe(false)
  slots.close()
  expect(open.signal.aborted).toBe(true)
  // The stream gives its slot back once it has ended.
  open.release()
  const refused = await slots.open('k1', check).catch((error: unknown) => error)
  expect(refused).toBeInstanceOf(GatewayError)
  expect((refused as GatewayError).status).toBe(503)
  expect(slots.openFor('k1')).toBe(0)
})
