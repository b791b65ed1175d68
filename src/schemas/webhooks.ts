/** Request shapes of the webhook API (docs/events-and-webhooks.md). */
import { z } from 'zod'
import { WEBHOOK_EVENT_TYPES } from '../domain.ts'
import { storableText } from './text.ts'
import { wholeNumberText } from './whole-number.ts'

/** `POST /v1/webhooks`. Without `events`, all four. */
export const createWebhookBody = z.strictObject({
  url: storableText().min(1).max(2048),
  events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).optional(),
})

/** `GET /v1/webhooks/{id}/deliveries`: newest first; `after` is the last event id of a page. */
export const deliveriesQuery = z.object({
  limit: wholeNumberText(1, 100, 100).default(100),
  after: z.string().min(1).optional(),
})
