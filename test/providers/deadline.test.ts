/**
 * The upstream call's deadline (providers/deadline.ts): a whole-call timeout, which a stream turns
 * into a timeout between bytes within a bound in all once its answer has begun.
 */
import { expect, test } from 'bun:test'
import { createDeadline } from '../../providers/deadline.ts'
import { classifyException } from '../../providers/classify-error.ts'

test('a whole call times out after timeoutMs, whatever arrives meanwhile', async () => {
  const deadline = createDeadline(60)
  deadline.touch()
  await Bun.sleep(100)
  expect(deadline.timedOut).toBe(true)
  expect(classifyException(new Error('aborted'), deadline, null).message).toBe(
    'no complete answer within 60 ms',
  )
  deadline.done()
})

test('once a stream began, each touch starts the timeout over; silence past it times out', async () => {
  const deadline = createDeadline(80)
  deadline.idleFromNow(10_000)
  for (let i = 0; i < 6; i++) {
    await Bun.sleep(40)
    deadline.touch()
  }
  // 240 ms in all, never 80 ms without a touch.
  expect(deadline.timedOut).toBe(false)
  await Bun.sleep(150)
  expect(deadline.timedOut).toBe(true)
  expect(classifyException(new Error('aborted'), deadline, null).message).toBe(
    'the stream sent nothing for 80 ms',
  )
  deadline.done()
})

test('a stream that keeps sending still ends at its bound in all', async () => {
  const deadline = createDeadline(80)
  deadline.idleFromNow(200)
  const started = performance.now()
  while (!deadline.timedOut && performance.now() - started < 2_000) {
    await Bun.sleep(20)
    deadline.touch()
  }
  expect(deadline.timedOut).toBe(true)
  expect(performance.now() - started).toBeLessThan(600)
  expect(classifyException(new Error('aborted'), deadline, null).message).toBe(
    'the stream did not end within 200 ms',
  )
  deadline.done()
})
