/**
 * The background loops, started once the HTTP server listens: the dispatcher, the batch lanes,
 * the batches waiting for credit, the janitor, the webhook deliveries and the usage recorder.
 */
import { createJanitor, type Janitor } from '../retention/janitor.ts'
import { createWebhookDeliverer, type WebhookDeliverer } from '../webhooks/deliver-webhooks.ts'
import type { Dispatching } from './build-dispatch.ts'
import type { GatewayCore } from './gateway-core.ts'

export function startLoops(
  core: GatewayCore,
  dispatching: Dispatching,
): { janitor: Janitor; webhooks: WebhookDeliverer } {
  const { config, store, logger } = core
  dispatching.dispatcher?.start()
  dispatching.lanes?.start()
  dispatching.waiting.start()
  const janitor = createJanitor(store, core.blobs, logger, config.retention)
  janitor.start(config.retention.intervalMs, { singleInstance: store.kind === 'sqlite' })
  // Every instance delivers; the store's leases give each attempt to one of them.
  const webhooks = createWebhookDeliverer(store, {
    owner: core.instanceId,
    timeoutMs: config.webhooks.timeoutMs,
    retryBaseMs: config.webhooks.retryBaseMs,
    disableAfterMs: config.webhooks.disableAfterMs,
    allowPrivate: config.webhooks.allowPrivate,
    pollMs: config.dispatch.pollMs,
    logger,
    onAttempt: (result) => core.metrics.webhookAttempt(result),
  })
  webhooks.start()
  core.usage.start()
  return { janitor, webhooks }
}
