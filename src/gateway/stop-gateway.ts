/** The stop sequence: each part stops after what still uses it and before what it uses. */
import type { BatchChanges } from '../coordination/batch-changes.ts'
import type { KeyRevocations } from '../coordination/key-revocations.ts'
import type { FileValidator } from '../ingest/parallel-validation.ts'
import type { LiveCredit } from '../live/live-credit.ts'
import type { Janitor } from '../retention/janitor.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import type { FleetGates } from '../upstream/fleet-gate.ts'
import type { Upstreams } from '../upstream/upstreams.ts'
import type { WebhookDeliverer } from '../webhooks/deliver-webhooks.ts'
import type { ListeningApp } from './build-app.ts'
import type { Dispatching } from './build-dispatch.ts'
import type { GatewayCore } from './gateway-core.ts'

/** Every part of a running gateway that has something to stop or close. */
export interface RunningParts {
  core: GatewayCore
  dispatching: Dispatching
  http: ListeningApp
  janitor: Janitor
  webhooks: WebhookDeliverer
  credit: LiveCredit
  schemaChecks: SchemaChecks
  batchChanges: BatchChanges
  revocations: KeyRevocations
  fleet: FleetGates | null
  upstreams: Upstreams
}

export async function stopGateway(parts: RunningParts): Promise<void> {
  const { core, dispatching, http } = parts
  await dispatching.waiting.stop()
  await parts.janitor.stop()
  // Attempts under way end, their deliveries handed back for another instance or the next start.
  await parts.webhooks.stop()
  // Progress streams end first, cleanly: the drain below waits for open responses.
  http.slots.close()
  const drainMs = core.config.dispatch.drainMs
  // Requests under way (live calls, uploads, downloads) and lines in flight finish side by side,
  // each within the drain, so a stop takes one drain, not two. Both run to their end even when
  // one fails: the dispatcher always hands its lines back.
  const drained = await Promise.allSettled([
    (async () => {
      await drainRequests(http.app, drainMs)
      // Charges of answered live calls written, leases handed back.
      await parts.credit.stop()
      await http.validator.close()
    })(),
    (async () => {
      // Before the dispatcher: a tick under way ends while the store is open.
      await dispatching.lanes?.stop()
      // Stop claiming, let in-flight lines finish (bounded), hand the rest back.
      await dispatching.dispatcher?.stop()
    })(),
  ])
  for (const part of drained) if (part.status === 'rejected') throw part.reason
  await parts.schemaChecks.close()
  // After the dispatcher: the lines it finished while draining are counted too.
  await core.usage.stop()
  await dispatching.nudges.close()
  await parts.batchChanges.close()
  await parts.revocations.close()
  await parts.fleet?.close()
  // Before the store closes: the last metric export still reads the queue depth from it.
  await core.telemetry.shutdown()
  await parts.upstreams.close()
  await core.blobs.close()
  await core.limiter.close()
  core.redis?.disconnect()
  await core.store.close()
  // Last: another gateway may open the data dir from here on.
  core.dataDirLock?.release()
}

/**
 * Stops taking connections at once; requests under way get `drainMs` to finish, as lines in
 * flight do (a live call cut here would have been sent upstream and never answered), and
 * whatever is still open after that is cut.
 */
async function drainRequests(app: ListeningApp['app'], drainMs: number): Promise<void> {
  const server = app.server
  if (!server) return
  let timer: ReturnType<typeof setTimeout> | undefined
  const drainEnded = new Promise<void>((resolve) => (timer = setTimeout(resolve, drainMs)))
  await Promise.race([server.stop(false), drainEnded])
  clearTimeout(timer)
  await app.stop(true)
}
