/**
 * The webhook deliverer: every instance runs one, beside the janitor. Each round claims due
 * deliveries from the store's outbox with a lease (one instance per attempt), POSTs the event
 * signed for that attempt, and records the answer (claims are fair: round-robin across webhooks,
 * at most 2 attempts in flight per webhook, docs/webhooks-and-streams.md): a 2xx within the timeout is delivered,
 * anything else is tried again later (retry-schedule.ts) with the same `webhook-id`. A lease is
 * twice the timeout, so an attempt always ends (and is recorded) before another instance could
 * take it; an instance that dies mid-attempt loses only its lease, and the delivery is sent again
 * when it runs out. At least once: a receiver that answered 2xx just before such a death gets the
 * event again, with the same `webhook-id`, by which it can tell.
 */
import { Agent, request } from 'undici/index.js'
import { nowSeconds } from '../domain.ts'
import { excerpt } from '../excerpt.ts'
import { createPeriodicTask } from '../dispatch/periodic-task.ts'
import type { ClaimedDelivery, DeliveryResult, WebhookStore } from '../store/store.ts'
import { DISABLE_AFTER_MS } from '../store/webhooks/webhook-rows.ts'
import type { Logger } from '../telemetry/logger.ts'
import { guardedLookup, webhookUrlProblem } from './check-webhook-url.ts'
import { nextAttemptAt } from './retry-schedule.ts'
import { signedHeaders } from './sign-webhook.ts'

export interface WebhookDelivererOptions {
  owner: string
  /** Told how each recorded attempt went (the metrics count them). */
  onAttempt?: (result: 'delivered' | 'retry' | 'failed') => void
  /** An attempt without a 2xx answer by then has failed (docs/events-and-webhooks.md: 15 s). */
  timeoutMs: number
  retryBaseMs: number
  /** A webhook whose every attempt failed for this long is disabled (docs/webhooks-and-streams.md: 24 h). */
  disableAfterMs?: number
  allowPrivate: boolean
  pollMs: number
  logger: Logger
  /** Attempts in flight at once on this instance (default DELIVERY_SLOTS). */
  concurrency?: number
}

/**
 * Attempts in flight at once per instance. A webhook holds at most 2 (the claim's cap, docs/webhooks-and-streams.md)
 * and an account at most 20 webhooks, so one account's stalled receivers hold at most 40 slots
 * for a timeout and the rest go round-robin to everyone else's; it takes four such accounts to
 * fill an instance. Each slot is one socket to a receiver.
 */
export const DELIVERY_SLOTS = 128

export interface WebhookDeliverer {
  start(): void
  /** Stops claiming, ends the attempts under way and hands their deliveries back. */
  stop(): Promise<void>
}

/** What a receiver's answer may add to the delivery log. */
const ANSWER_CHARS = 200

/** The event as OpenAI sends it (contracts: WebhookBatchCompleted and its siblings). */
export const eventBody = (delivery: ClaimedDelivery) =>
  JSON.stringify({
    id: delivery.eventId,
    object: 'event',
    type: delivery.type,
    created_at: delivery.createdAt,
    data: { id: delivery.batchId },
  })

export function createWebhookDeliverer(
  store: WebhookStore,
  options: WebhookDelivererOptions,
): WebhookDeliverer {
  const { owner, timeoutMs, logger } = options
  const concurrency = options.concurrency ?? DELIVERY_SLOTS
  const leaseMs = 2 * timeoutMs
  // Every connection checks the addresses it is about to use, by the rule the URL was taken on:
  // an http:// one (the opt-in's) never reaches a public address, whatever its name resolves to.
  const agentFor = (plain: boolean) =>
    new Agent({
      connect: {
        timeout: timeoutMs,
        lookup: guardedLookup(options.allowPrivate, plain) as never,
      },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      keepAliveTimeout: 10_000,
    })
  const agents = { https: agentFor(false), http: agentFor(true) }
  let stopping = false
  const inFlight = new Set<Promise<void>>()
  /** The attempts under way, to end them at a stop. */
  const attempts = new Set<AbortController>()

  const sender: Sender = { agents, options, attempts, stopping: () => stopping }

  async function attempt(delivery: ClaimedDelivery) {
    const sent = await sendDelivery(sender, delivery)
    // Ended by a stop: the delivery is handed back whole (releaseDeliveries), the attempt not
    // counted. An attempt that got its answer is recorded, stop or not.
    if (sent.stopped) return
    const nowMs = Date.now()
    const result = attemptResult(delivery, sent, nowMs, options)
    const by = { owner, nowMs, disableAfterMs: options.disableAfterMs }
    const recorded = await store.finishDelivery(by, delivery, result)
    // Never the URL or the secret: the log names the webhook and the event.
    const fields = {
      webhook_id: delivery.webhookId,
      event_id: delivery.eventId,
      attempts: delivery.attempts,
      status_code: sent.statusCode,
      recorded,
    }
    options.onAttempt?.(result.kind)
    if (result.kind === 'delivered') logger.info('webhook.delivered', fields)
    else logger.info(result.kind === 'failed' ? 'webhook.failed' : 'webhook.retry', fields)
  }

  const task = createPeriodicTask(
    async () => {
      const free = concurrency - inFlight.size
      if (free <= 0 || stopping) return false
      const nowMs = Date.now()
      const claimed = await store.claimDeliveries(owner, free, nowMs, nowMs + leaseMs)
      for (const delivery of claimed) {
        const running: Promise<void> = attempt(delivery)
          .catch((error) =>
            logger.warn('webhook.attempt_error', {
              webhook_id: delivery.webhookId,
              event_id: delivery.eventId,
              reason: (error as Error).message,
            }),
          )
          .finally(() => {
            inFlight.delete(running)
            task.soon()
          })
        inFlight.add(running)
      }
      return claimed.length === free
    },
    {
      everyMs: options.pollMs,
      earlyGapMs: 10,
      onError: (error) => logger.warn('webhook.claim_failed', { reason: error.message }),
    },
  )

  return {
    start: () => task.start(),
    async stop() {
      task.stop()
      stopping = true
      for (const controller of attempts) controller.abort(new Error('stopping'))
      await Promise.allSettled([...inFlight])
      await store.releaseDeliveries(owner, Date.now()).catch(() => 0)
      await Promise.all([agents.https.close(), agents.http.close()])
    },
  }
}

/**
 * What an attempt that got its answer (or failed to) records at `nowMs`: delivered, a retry
 * (retry-schedule.ts), or given up.
 */
export function attemptResult(
  delivery: ClaimedDelivery,
  sent: { statusCode: number | null; error: string | null },
  nowMs: number,
  options: Pick<WebhookDelivererOptions, 'retryBaseMs' | 'disableAfterMs'>,
): DeliveryResult {
  if (sent.error === null) return { kind: 'delivered', statusCode: sent.statusCode! }
  // Failing since the store's record of it, or since this failure if it is the first.
  const failingSinceMs = delivery.failingSinceMs ?? nowMs
  const at = nextAttemptAt({
    attempts: delivery.attempts,
    createdAtMs: delivery.createdAt * 1000,
    nowMs,
    baseMs: options.retryBaseMs,
    disableAtMs: failingSinceMs + (options.disableAfterMs ?? DISABLE_AFTER_MS),
  })
  return at === null
    ? { kind: 'failed', statusCode: sent.statusCode, error: sent.error }
    : { kind: 'retry', atMs: at, statusCode: sent.statusCode, error: sent.error }
}

/** What one attempt is sent with: the guarded agents, the options, the attempts under way. */
interface Sender {
  agents: { https: Agent; http: Agent }
  options: WebhookDelivererOptions
  /** The attempts under way, to end them at a stop. */
  attempts: Set<AbortController>
  stopping: () => boolean
}

/** How the attempt went; `stopped` when a stop ended it before an answer. */
async function sendDelivery(
  sender: Sender,
  delivery: ClaimedDelivery,
): Promise<{ statusCode: number | null; error: string | null; stopped?: true }> {
  const { agents, options, attempts } = sender
  const { timeoutMs } = options
  // The rules of the create, again: the host may resolve elsewhere now. Within the attempt's
  // time, so that the whole attempt ends well inside its lease.
  const startedAt = Date.now()
  const problem = await webhookUrlProblem(delivery.url, options.allowPrivate, timeoutMs)
  if (problem) return { statusCode: null, error: `not sent: ${problem}` }
  const body = eventBody(delivery)
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'Multigrid-Webhooks/1',
    ...signedHeaders(delivery.secret, { id: delivery.eventId, timestamp: nowSeconds(), body }),
  }
  // One controller per attempt, aborted by the timeout or a stop and by nothing once the attempt
  // has ended: undici fails a finished request's body with an unhandled error if its signal fires.
  const controller = new AbortController()
  const timer = setTimeout(
    () => controller.abort(new Error('timeout')),
    Math.max(0, startedAt + timeoutMs - Date.now()),
  )
  attempts.add(controller)
  try {
    const response = await request(delivery.url, {
      dispatcher: new URL(delivery.url).protocol === 'http:' ? agents.http : agents.https,
      method: 'POST',
      headers,
      body,
      signal: controller.signal,
    })
    const ok = response.statusCode >= 200 && response.statusCode < 300
    const moved = ok
      ? null
      : redirectNote(response.statusCode, response.headers.location, delivery.url)
    const answer = moved ?? (ok ? '' : await readSome(response.body))
    if (ok || moved) await response.body.dump().catch(() => {})
    return {
      statusCode: response.statusCode,
      error: ok ? null : `HTTP ${response.statusCode}${answer ? `: ${answer}` : ''}`,
    }
  } catch (error) {
    if (controller.signal.aborted) {
      if (sender.stopping()) return { statusCode: null, error: 'stopped', stopped: true }
      return { statusCode: null, error: `no answer within ${timeoutMs} ms` }
    }
    return { statusCode: null, error: describeFailure(error) }
  } finally {
    clearTimeout(timer)
    attempts.delete(controller)
  }
}

/**
 * A redirect's entry in the log: not followed (docs/events-and-webhooks.md), so the owner is told
 * where it pointed instead of being left with a bare "HTTP 302".
 */
function redirectNote(
  statusCode: number,
  location: string | string[] | undefined,
  url: string,
): string | null {
  if (statusCode < 300 || statusCode >= 400 || typeof location !== 'string') return null
  let target: string
  try {
    target = new URL(location, url).href
  } catch {
    return null
  }
  return excerpt(
    `redirects are not followed; to deliver there, make a webhook with ${target}`,
    ANSWER_CHARS,
  )
}

/** The first characters of a refusing receiver's answer, on one line. */
async function readSome(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of body) {
      chunks.push(chunk)
      size += chunk.length
      if (size >= 4 * ANSWER_CHARS) break
    }
  } catch {
    // An answer cut off is still an answer: its status says what happened.
  } finally {
    body.destroy()
  }
  const text = Buffer.concat(chunks)
    .toString('utf8')
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
  return excerpt(text.trim(), ANSWER_CHARS)
}

function describeFailure(error: unknown): string {
  const code = (error as { code?: string }).code
  const cause = (error as { cause?: { code?: string; message?: string } }).cause
  if (code === 'EPRIVATE' || cause?.code === 'EPRIVATE')
    return `not sent: ${cause?.message ?? (error as Error).message}`
  const which = cause?.code ?? code
  if (which === 'ECONNREFUSED') return 'connection refused'
  if (which === 'ENOTFOUND') return 'the host could not be resolved'
  return excerpt(which ?? (error as Error).message ?? String(error), ANSWER_CHARS)
}
