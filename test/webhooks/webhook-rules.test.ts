/**
 * The pieces of webhook delivery that need no gateway: which addresses may be reached, the check
 * made again when an attempt connects, the retry schedule, and the signature as the official SDK
 * checks it.
 */
import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { classifyAddress, type AddressKind } from '../../src/webhooks/classify-address.ts'
import { guardedLookup, webhookUrlProblem } from '../../src/webhooks/check-webhook-url.ts'
import {
  MAX_RETRY_DELAY_MS,
  nextAttemptAt,
  RETRY_WINDOW_MS,
} from '../../src/webhooks/retry-schedule.ts'
import { newWebhookSecret, signedHeaders } from '../../src/webhooks/sign-webhook.ts'

describe('addresses a webhook may reach', () => {
  test('public unicast only; every other kind is named', () => {
    const kinds: Record<string, AddressKind> = {
      '8.8.8.8': 'public',
      '172.32.0.1': 'public',
      '2606:4700::1111': 'public',
      '::ffff:8.8.8.8': 'public',
      '127.0.0.1': 'loopback',
      '127.255.0.9': 'loopback',
      '::1': 'loopback',
      '::ffff:127.0.0.1': 'loopback',
      '::ffff:7f00:1': 'loopback',
      '10.1.2.3': 'private',
      '172.16.0.1': 'private',
      '172.31.255.255': 'private',
      '192.168.1.1': 'private',
      'fd12:3456::1': 'private',
      '64:ff9b::a00:1': 'private', // NAT64 of 10.0.0.1
      '2002:a00:1::1': 'private', // 6to4 of 10.0.0.1
      '169.254.169.254': 'link-local',
      'fe80::1%eth0': 'link-local',
      '100.64.0.1': 'shared',
      '0.0.0.0': 'unspecified',
      '::': 'unspecified',
      '224.0.0.1': 'multicast',
      'ff02::1': 'multicast',
      '255.255.255.255': 'reserved',
      '192.0.2.1': 'reserved',
      '2001:db8::1': 'reserved',
      'not-an-ip': 'reserved',
    }
    const seen = Object.fromEntries(Object.keys(kinds).map((a) => [a, classifyAddress(a)]))
    expect(seen).toEqual(kinds)
  })

  test('a URL is judged by every address its host resolves to; the opt-in allows private ones', async () => {
    expect(await webhookUrlProblem('https://8.8.8.8/hook', false)).toBeNull()
    expect(await webhookUrlProblem('https://localhost:8443/hook', false)).toMatch(
      /^localhost resolves to (127\.0\.0\.1|::1), a loopback address/,
    )
    expect(await webhookUrlProblem('http://localhost:8443/hook', true)).toBeNull()
    expect(await webhookUrlProblem('https://10.0.0.1/hook', true)).toBeNull()
    expect(await webhookUrlProblem('http://8.8.8.8/hook', true)).toMatch(/use https:\/\//)
  })

  test('the opt-in allows loopback and private addresses only: never cloud metadata or the other kinds', async () => {
    const refused = {
      'http://169.254.169.254/latest/meta-data/': 'link-local',
      'http://[fe80::1]/x': 'link-local',
      'http://0.0.0.0:8080/x': 'unspecified',
      'http://224.0.0.1/x': 'multicast',
      'http://240.0.0.1/x': 'reserved',
      'http://100.64.0.1/x': 'shared',
    }
    for (const [url, kind] of Object.entries(refused))
      expect(await webhookUrlProblem(url, true)).toMatch(
        new RegExp(
          `, an? ${kind} address: webhooks may reach public, loopback and private addresses, no other kind$`,
        ),
      )
    expect(await webhookUrlProblem('http://[fd00::1]/x', true)).toBeNull()
    expect(await webhookUrlProblem('http://127.0.0.1:9/x', true)).toBeNull()
  })

  test('the lookup made when an attempt connects refuses a name that resolves privately', async () => {
    const lookup = (host: string) =>
      new Promise<{ error: Error | null; addresses: unknown }>((resolve) =>
        guardedLookup(false)(host, { all: true }, (error, addresses) =>
          resolve({ error, addresses }),
        ),
      )
    const refused = await lookup('localhost')
    expect(refused.error?.message).toMatch(/localhost resolves to .*, a loopback address/)
    expect((refused.error as { code?: string }).code).toBe('EPRIVATE')
    // With the opt-in, the same name connects.
    const withOptIn = (host: string, plain: boolean) =>
      new Promise<Error | null>((resolve) =>
        guardedLookup(true, plain)(host, { all: true }, (error) => resolve(error)),
      )
    expect(await withOptIn('localhost', false)).toBeNull()
    expect(await withOptIn('localhost', true)).toBeNull()
    // An http:// delivery never connects to a public address, whatever its name resolves to now.
    expect(await withOptIn('8.8.8.8', false)).toBeNull()
    expect((await withOptIn('8.8.8.8', true))?.message).toBe(
      '8.8.8.8 resolves to the public address 8.8.8.8: http:// is allowed only to loopback and private addresses',
    )
  })
})

describe('the retry schedule', () => {
  const at = (attempts: number, nowMs: number, random = () => 0.5) =>
    nextAttemptAt({ attempts, createdAtMs: 0, nowMs, baseMs: 5_000, random })

  test('doubles from the base up to an hour, with ±10% jitter', () => {
    expect([1, 2, 3, 4].map((n) => at(n, 1_000)! - 1_000)).toEqual([5_000, 10_000, 20_000, 40_000])
    expect(at(20, 1_000)! - 1_000).toBe(MAX_RETRY_DELAY_MS)
    expect(at(1, 0, () => 0)).toBe(4_500)
    expect(at(1, 0, () => 1)).toBe(5_500)
  })

  test('gives up once the next attempt would fall past 24 hours after the event', () => {
    let now = 0
    let attempts = 0
    for (;;) {
      attempts++
      const next = at(attempts, now)
      if (next === null) break
      now = next
    }
    expect(now).toBeLessThanOrEqual(RETRY_WINDOW_MS)
    expect(now).toBeGreaterThan(RETRY_WINDOW_MS - MAX_RETRY_DELAY_MS)
    expect(attempts).toBeGreaterThanOrEqual(30)
    expect(attempts).toBeLessThanOrEqual(40)
  })

  /** Every attempt's time, failing from the first at `firstMs`, given when a failure disables. */
  const attemptTimes = (firstMs: number, disableAtMs: number | null, random = () => 0.5) => {
    const times = [firstMs]
    for (let attempts = 1; attempts <= 100; attempts++) {
      const next = nextAttemptAt({
        attempts,
        createdAtMs: 0,
        nowMs: times.at(-1)!,
        baseMs: 5_000,
        disableAtMs,
        random,
      })
      if (next === null) return times
      times.push(next)
    }
    throw new Error('the schedule did not end')
  }

  test('a webhook failing only this event gets a last attempt when a failure disables it', () => {
    for (const random of [() => 0, () => 0.5, () => 1]) {
      const plain = attemptTimes(300, null, random)
      // First failed 300 ms after the event: a failure from 24 h later on disables the webhook.
      const disableAt = 300 + RETRY_WINDOW_MS
      const times = attemptTimes(300, disableAt, random)
      // The ordinary retries are the same; one more attempt follows, just past the window.
      expect(plain.at(-1)!).toBeLessThan(disableAt)
      expect(times).toEqual([...plain, disableAt])
    }
  })

  test('no last attempt when a failure disables already, or not within an hour of the window', () => {
    const plain = attemptTimes(300, null)
    expect(attemptTimes(300, 10_000)).toEqual(plain)
    expect(attemptTimes(300, RETRY_WINDOW_MS + MAX_RETRY_DELAY_MS + 1)).toEqual(plain)
  })
})

describe('signing', () => {
  test('the official SDK verifies a signed message, and refuses it altered or under another secret', async () => {
    const openai = new OpenAI({ apiKey: 'unused' })
    const secret = newWebhookSecret()
    const body =
      '{"id":"evt_1","object":"event","type":"batch.completed","created_at":1,"data":{"id":"batch_1"}}'
    const headers = signedHeaders(secret, {
      id: 'evt_1',
      timestamp: Math.floor(Date.now() / 1000),
      body,
    })
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
    expect(await openai.webhooks.unwrap(body, headers, secret)).toMatchObject({ id: 'evt_1' })
    await expect(
      openai.webhooks.unwrap(body.replace('batch_1', 'batch_2'), headers, secret),
    ).rejects.toThrow(/signature/)
    await expect(openai.webhooks.unwrap(body, headers, newWebhookSecret())).rejects.toThrow(
      /signature/,
    )
  })

  test('matches the Standard Webhooks reference vector', () => {
    // From the Standard Webhooks specification's reference implementations.
    const headers = signedHeaders('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', {
      id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      timestamp: 1614265330,
      body: '{"test": 2432232314}',
    })
    expect(headers['webhook-signature']).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=')
  })
})
