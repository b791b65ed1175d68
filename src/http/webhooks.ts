/**
 * The webhook API (docs/events-and-webhooks.md), scope `batches`: create (the one answer that shows the secret),
 * list, delete, enable again after it was disabled (docs/webhooks-and-streams.md), and each webhook's delivery log.
 * Another account's webhook is a 404.
 */
import { Elysia } from 'elysia'
import type { Authenticator } from '../auth/authenticate.ts'
import { newId, nowSeconds, WEBHOOK_EVENT_TYPES } from '../domain.ts'
import { badRequest, notFound, refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import { describeZodIssue } from '../ingest/issues.ts'
import { readJsonBody, type BodyLimit } from '../ingest/read-body.ts'
import { createWebhookBody, deliveriesQuery } from '../schemas/webhooks.ts'
import type { WebhookDeliveryObject, WebhookObject } from '../schemas/native-objects.ts'
import type { DeliveryRecord, WebhookRecord, WebhookStore } from '../store/store.ts'
import { webhookUrlProblem } from '../webhooks/check-webhook-url.ts'
import { newWebhookSecret } from '../webhooks/sign-webhook.ts'
import { parseQuery } from './parse-query.ts'
import { renderPage } from './render-page.ts'

/** Webhooks per account: enough for every receiver a team runs, few enough to list whole. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 20

export interface WebhookDeps {
  auth: Authenticator
  store: WebhookStore
  bodyLimit: BodyLimit
  allowPrivate: boolean
}

/** A webhook as answered: never its secret, but in the create's answer. */
export const renderWebhook = (webhook: WebhookRecord): WebhookObject => ({
  id: webhook.id,
  object: 'webhook',
  url: webhook.url,
  events: webhook.events,
  created_at: webhook.createdAt,
  // docs/webhooks-and-streams.md: disabled after 24 h of failed attempts, until POST /v1/webhooks/{id}/enable.
  status: webhook.disabledAt === null ? 'enabled' : 'disabled',
  disabled_at: webhook.disabledAt,
})

export const renderDelivery = (delivery: DeliveryRecord): WebhookDeliveryObject => ({
  object: 'webhook.delivery',
  webhook_id: delivery.webhookId,
  event_id: delivery.eventId,
  event_type: delivery.type,
  batch_id: delivery.batchId,
  status: delivery.status,
  attempts: delivery.attempts,
  last_status_code: delivery.lastStatusCode,
  last_error: delivery.lastError,
  created_at: delivery.createdAt,
  last_attempt_at: delivery.lastAttemptAt,
  next_attempt_at:
    delivery.nextAttemptAtMs === null ? null : Math.ceil(delivery.nextAttemptAtMs / 1000),
  delivered_at: delivery.deliveredAt,
})

export function webhookRoutes({ auth, store, bodyLimit, allowPrivate }: WebhookDeps) {
  const caller = (request: Request, set: { headers: unknown }) =>
    auth.authenticate(
      request.headers.get('authorization'),
      'batches',
      set.headers as Record<string, string>,
    )
  return new Elysia({ name: 'webhooks' })
    .post(
      '/v1/webhooks',
      async ({ request, set }) => {
        const { account } = await caller(request, set)
        const body = await parseCreate(request, bodyLimit)
        const problem = await webhookUrlProblem(body.url, allowPrivate)
        if (problem) throw badRequest(problem, 'url')
        const events = body.events
          ? WEBHOOK_EVENT_TYPES.filter((type) => body.events!.includes(type))
          : [...WEBHOOK_EVENT_TYPES]
        const webhook: WebhookRecord = {
          id: newId('whe_'),
          accountId: account.id,
          url: body.url,
          events,
          secret: newWebhookSecret(),
          createdAt: nowSeconds(),
          disabledAt: null,
        }
        if (!(await store.createWebhook(webhook, MAX_WEBHOOKS_PER_ACCOUNT))) {
          throw refuse(
            'limit_exceeded',
            `this account has ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks already; delete one (DELETE /v1/webhooks/{id}) before adding another`,
            {
              detail: {
                limit: { webhooks: MAX_WEBHOOKS_PER_ACCOUNT, in_use: MAX_WEBHOOKS_PER_ACCOUNT },
              },
            },
          )
        }
        set.status = 201
        // The only answer with the secret: it is needed to verify deliveries, and never shown again.
        return { ...renderWebhook(webhook), secret: webhook.secret }
      },
      { parse: 'none' },
    )
    .get('/v1/webhooks', async ({ request, set }) => {
      const { account } = await caller(request, set)
      const webhooks = await store.listWebhooks(account.id)
      return { object: 'list', data: webhooks.map(renderWebhook) }
    })
    .delete(
      '/v1/webhooks/:id',
      async ({ request, set, params }) => {
        const { account } = await caller(request, set)
        if (!(await store.deleteWebhook(account.id, params.id)))
          throw notFound(`webhook ${excerpt(params.id)}`)
        return { id: params.id, object: 'webhook.deleted', deleted: true }
      },
      { parse: 'none' },
    )
    .post(
      '/v1/webhooks/:id/enable',
      async ({ request, set, params }) => {
        const { account } = await caller(request, set)
        const webhook = await store.enableWebhook(account.id, params.id)
        if (!webhook) throw notFound(`webhook ${excerpt(params.id)}`)
        return renderWebhook(webhook)
      },
      { parse: 'none' },
    )
    .get('/v1/webhooks/:id/deliveries', async ({ request, set, params }) => {
      const { account } = await caller(request, set)
      const query = parseQuery(deliveriesQuery, request.url)
      const page = await store.listDeliveries(account.id, params.id, {
        limit: query.limit,
        after: query.after ?? null,
      })
      if (!page) throw notFound(`webhook ${excerpt(params.id)}`)
      const data = page.deliveries.map(renderDelivery)
      return renderPage(data, page.hasMore, (item) => item.event_id)
    })
}

/** The create's body, read only now that the key has been checked. */
async function parseCreate(request: Request, limit: BodyLimit) {
  const read = await readJsonBody(request, limit)
  if (!read.ok || read.value === undefined) {
    throw badRequest(
      'the body must be a JSON object {"url": "https://…", "events"?: [...]}; send it with Content-Type: application/json',
    )
  }
  const parsed = createWebhookBody.safeParse(read.value, { reportInput: true })
  if (parsed.success) return parsed.data
  const issue = describeZodIssue(parsed.error.issues[0]!, '')
  throw badRequest(`${issue.path || 'body'} ${issue.message}; ${issue.fix}`, issue.path || null)
}
