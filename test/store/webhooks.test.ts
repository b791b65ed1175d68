/**
 * The webhook store's contract (src/store/webhooks/) on every store (every-store.ts): endpoints
 * and the outbox (webhook-contract.ts; on a file the dispatcher's thread finishes batches, and so
 * enqueues their deliveries), and fair claims across webhooks (webhook-fairness-contract.ts).
 */
import { onEveryStore } from './every-store.ts'
import { runWebhookStoreContract } from './webhook-contract.ts'
import { runWebhookFairnessContract } from './webhook-fairness-contract.ts'

onEveryStore(({ name, makeStore }) => runWebhookStoreContract(name, makeStore))
onEveryStore(({ name, makeStore }) => runWebhookFairnessContract(name, makeStore), { file: false })
