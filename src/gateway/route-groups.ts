/** The HTTP route groups, one Elysia instance each, in the order the app mounts them. */
import { Elysia } from 'elysia'
import type { Accounts } from '../accounts/accounts.ts'
import type { FineTunes } from '../accounts/fine-tunes.ts'
import type { Admission } from '../admission/submit-batch.ts'
import type { Authenticator } from '../auth/authenticate.ts'
import type { Dispatcher } from '../dispatch/dispatcher.ts'
import type { FileValidator } from '../ingest/parallel-validation.ts'
import { adminRoutes } from '../http/admin.ts'
import { anthropicBatchRoutes } from '../http/anthropic/message-batches-routes.ts'
import { anthropicMessagesRoutes } from '../http/anthropic/messages-routes.ts'
import { anthropicModelRoutes } from '../http/anthropic/models-routes.ts'
import type { BodyLimits } from '../http/body-limits.ts'
import { dashboardRoutes } from '../http/dashboard/dashboard-routes.ts'
import type { EventStreamSettings } from '../http/event-stream-response.ts'
import { healthRoutes, readinessChecks } from '../http/health.ts'
import { liveRoutes, liveService, type LiveDeps } from '../http/live.ts'
import { nativeBatchRoutes } from '../http/native-batches.ts'
import { openAiBatchRoutes } from '../http/openai/batches-routes.ts'
import { openAiFilesRoutes } from '../http/openai/files-routes.ts'
import { responsesRoutes } from '../http/responses/responses-routes.ts'
import { metricsRoutes, usageRoutes } from '../http/usage.ts'
import { webhookRoutes } from '../http/webhooks.ts'
import type { Store } from '../store/store.ts'
import type { GatewayCore } from './gateway-core.ts'

/** The services the routes call, built by build-app.ts. */
export interface RouteServices {
  auth: Authenticator
  admission: Admission
  validator: FileValidator
  accounts: Accounts
  fineTunes: FineTunes
  live: LiveDeps
  /** The batch routes' store: with lanes, it shows the lines inside their provider batches. */
  batchView: Store
  events: EventStreamSettings
  bodies: BodyLimits
  /** A batch was cancelled here, `lines` of its pending lines with it. */
  onCancelled: (id: string, lines: number) => void
  queueDepth: () => Promise<number>
  dispatcher: Dispatcher | null
}

type Group = Elysia<any, any, any, any, any, any, any>

export function routeGroups(core: GatewayCore, services: RouteServices): Group[] {
  const { config, store, catalog, limiter, usage } = core
  const { auth, live, bodies, dispatcher } = services
  const liveCalls = liveService(live)
  const groups = [
    healthRoutes(
      readinessChecks({
        store: () => store.ping(),
        redis: limiter.ping && (() => limiter.ping!()),
      }),
    ),
    nativeBatchRoutes({
      auth,
      store: services.batchView,
      admission: services.admission,
      maxBodyBytes: config.limits.maxBodyBytes,
      bodyLimit: bodies.nativeSubmit,
      retryLimit: bodies.retry,
      fileBuffers: services.validator.bodyBuffers,
      onCancelled: services.onCancelled,
      events: services.events,
    }),
    usageRoutes({ auth, store, flush: () => usage.flush() }),
    metricsRoutes({
      metrics: core.metrics,
      queueDepth: () => services.queueDepth(),
      inFlight: () => dispatcher?.inFlight ?? 0,
      replicas: () => live.upstreams.replicaCounts(),
      token: config.metricsToken,
    }),
    liveRoutes('', live),
    liveRoutes('/openai', live),
    // docs/clients/anthropic-sdk.md: the Responses API and the Anthropic API, on the same live path and admission.
    responsesRoutes('', liveCalls, catalog),
    responsesRoutes('/openai', liveCalls, catalog),
    anthropicMessagesRoutes(live, liveCalls),
    anthropicModelRoutes(live),
    ...batchRouteGroups(core, services),
  ]
  if (config.adminToken)
    groups.push(
      adminRoutes(config.adminToken, services.accounts, bodies.admin, services.fineTunes) as never,
    )
  return groups as never
}

/** Anthropic's and OpenAI's batch and file routes, webhooks and the dashboard. */
function batchRouteGroups(core: GatewayCore, services: RouteServices) {
  const { config, store, blobs, catalog } = core
  const { auth, admission, bodies, onCancelled, batchView } = services
  return [
    anthropicBatchRoutes({
      auth,
      store,
      admission,
      limits: config.limits,
      bodyLimit: bodies.nativeSubmit,
      onCancelled,
      now: core.clock,
    }),
    openAiFilesRoutes({
      auth,
      store,
      blobs,
      maxFileBytes: config.limits.maxFileBytes,
      quotaDefaults: {
        maxFiles: config.limits.defaultMaxFiles,
        maxStoredBytes: config.limits.defaultMaxStoredBytes,
      },
      bodyLimit: bodies.fileUpload,
    }),
    openAiBatchRoutes({
      auth,
      store: batchView,
      blobs,
      admission,
      bodyLimit: bodies.batchCreate,
      onCancelled,
      modelId: (name) => catalog.find(name)?.id ?? name,
    }),
    webhookRoutes({
      auth,
      store,
      bodyLimit: bodies.webhookCreate,
      allowPrivate: config.webhooks.allowPrivate,
    }),
    dashboardRoutes({
      auth,
      store: batchView,
      admission,
      maxBodyBytes: config.limits.maxBodyBytes,
      bodyLimits: bodies,
      sessionHours: config.sessionHours,
      onCancelled,
      events: services.events,
      flushUsage: () => core.usage.flush(),
    }),
  ]
}
