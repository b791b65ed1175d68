/**
 * Standard Webhooks signing, as OpenAI signs its webhooks (and so as the `openai` SDK's
 * `webhooks.unwrap` verifies them): the secret is `whsec_` + base64 of random bytes, and each
 * attempt carries `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`,
 * keyed with the secret's decoded bytes.
 */
import { createHmac, randomBytes } from 'node:crypto'

const PREFIX = 'whsec_'
/** 32 bytes: Standard Webhooks asks for 24 to 64. */
const SECRET_BYTES = 32

export const newWebhookSecret = () => PREFIX + randomBytes(SECRET_BYTES).toString('base64')

/** The headers of one attempt; `timestamp` is that attempt's time (Unix seconds). */
export function signedHeaders(
  secret: string,
  message: { id: string; timestamp: number; body: string },
): Record<string, string> {
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64')
  const signature = createHmac('sha256', key)
    .update(`${message.id}.${message.timestamp}.${message.body}`)
    .digest('base64')
  return {
    'webhook-id': message.id,
    'webhook-timestamp': String(message.timestamp),
    'webhook-signature': `v1,${signature}`,
  }
}
