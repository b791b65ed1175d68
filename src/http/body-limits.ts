/**
 * Every route's body limit, in one place. Each route reads its body through src/ingest/read-body.ts
 * with its limit here, after it has authenticated the caller, so no body is read for a request
 * that will be refused anyway and none past what the route can use. Routes not listed take no
 * body: they never read one, and Bun discards what a client sends them as it arrives.
 *
 * Bun's own server-wide cap (`maxRequestBodySize`) is lifted (gateway.ts): Bun would answer a body
 * over it with a bare 413 of its own, no §11 envelope, and close the connection before the client
 * could read even that. Every limit is enforced here instead, in the envelope.
 */
import type { Config } from '../config.ts'
import type { BodyLimit } from '../ingest/read-body.ts'

export interface BodyLimits {
  /** POST /dashboard/sign-in: one key (at most 512 characters) in a form. */
  signIn: BodyLimit
  /** POST /dashboard/batches: the JSONL file in a form, so the file limit plus the form's framing. */
  dashboardUpload: BodyLimit
  /** POST /admin/v1/…: small JSON objects. */
  admin: BodyLimit
  /** POST /openai/v1/batches: the create names a file; it does not carry one. */
  batchCreate: BodyLimit
  /**
   * POST /v1/chat/completions, /v1/embeddings, /v1/responses (also under /openai),
   * /anthropic/v1/messages and /anthropic/v1/messages/count_tokens.
   */
  live: BodyLimit
  /** POST /v1/batches: the JSONL file itself; POST /anthropic/v1/messages/batches: its requests. */
  nativeSubmit: BodyLimit
  /** POST /v1/batches/{id}/retry (and the dashboard's): a few options, the lines come from the parent. */
  retry: BodyLimit
  /** POST /openai/v1/files: the file (limited on its own while stored) plus the form's framing. */
  fileUpload: BodyLimit
  /** POST /v1/webhooks: a URL (≤ 2,048 characters) and at most four event names. */
  webhookCreate: BodyLimit
}

/** Room for a multipart form's boundaries, part headers and small fields around its file. */
export const FORM_FRAMING_BYTES = 64 * 1024

export function bodyLimits(limits: Config['limits']): BodyLimits {
  const file = (bytes: number) =>
    `split the requests into several files of at most ${bytes} bytes each`
  return {
    signIn: { bytes: 4 * 1024, what: 'a sign-in form', fix: 'send only the "key" field' },
    dashboardUpload: {
      bytes: limits.maxBodyBytes + FORM_FRAMING_BYTES,
      fileBytes: limits.maxBodyBytes,
      what: 'an uploaded batch file',
      fix: file(limits.maxBodyBytes),
      code: 'file_too_large',
    },
    admin: {
      bytes: 64 * 1024,
      what: 'an admin request',
      fix: 'send the JSON object the endpoint takes and nothing more',
    },
    batchCreate: {
      bytes: 64 * 1024,
      what: 'a batch create',
      fix: 'upload the requests with files.create and send only {"input_file_id", "endpoint", "completion_window"} here',
    },
    live: {
      bytes: limits.maxLiveBodyBytes,
      what: 'a live request',
      fix: 'send less (fewer or smaller images, a shorter prompt), send it as a batch, or ask the operator to raise MULTIGRID_MAX_LIVE_BODY_BYTES',
    },
    nativeSubmit: {
      bytes: limits.maxBodyBytes,
      what: 'a batch file',
      fix: file(limits.maxBodyBytes),
      code: 'file_too_large',
    },
    retry: {
      bytes: 4 * 1024,
      what: 'a retry request',
      fix: 'send at most {"completion_window_hours": 24, "max_cost_usd": "5"}: the lines come from the batch retried',
    },
    fileUpload: {
      bytes: limits.maxFileBytes + FORM_FRAMING_BYTES,
      fileBytes: limits.maxFileBytes,
      what: 'an uploaded file',
      fix: file(limits.maxFileBytes),
      code: 'file_too_large',
    },
    webhookCreate: {
      bytes: 16 * 1024,
      what: 'a webhook create',
      fix: 'send only {"url", "events"}',
    },
  }
}
