/** The dashboard's refusals as pages: what the JSON API answers as an error envelope. */
import { GatewayError } from '../../errors.ts'
import { BodyAborted } from '../../ingest/read-body.ts'
import { htmlResponse } from './layout.ts'
import { messagePage, signInPage } from './pages.ts'
import { clearedCookie } from './session.ts'

const TITLES: Record<number, string> = {
  400: 'That did not work',
  402: 'Not enough credit',
  403: 'Not allowed',
  404: 'Not found',
  409: 'Not yet',
  410: 'Gone',
  413: 'Too large',
  415: 'Not accepted',
  429: 'Limit reached',
}

/** An expected refusal as a page; anything else is a bug for the app's error handler. */
export function refusalPage(
  error: unknown,
  request: Request,
  headers: Record<string, string>,
  account?: string,
): Response {
  // An aborted body has nobody to show a page to: the app's handler logs it.
  if (!(error instanceof GatewayError) || error instanceof BodyAborted) throw error
  if (error.status === 401) {
    const text = 'That key is unknown or was revoked; sign in with a valid one.'
    return htmlResponse(401, signInPage({ kind: 'error', text }), {
      ...headers,
      'set-cookie': clearedCookie(request),
    })
  }
  const retry = error.options.headers?.['retry-after']
  const page = messagePage(
    TITLES[error.status] ?? 'Error',
    { kind: 'error', text: error.message },
    account,
    retry ? Number(retry) : undefined,
  )
  return htmlResponse(error.status, page, { ...headers, ...error.options.headers })
}

/** A form posted from another site (session.ts, fromThisOrigin). */
export const forbiddenOrigin = () =>
  htmlResponse(
    403,
    messagePage('Not allowed', {
      kind: 'error',
      text: 'This form was posted from another site; use the dashboard itself.',
    }),
  )
