/**
 * The dashboard's authentication, written once: a route that names `signedIn` (the scope it
 * needs) is handed the `caller` its session cookie stands for and the `pageHeaders` its answer
 * carries (the X-RateLimit-* ones), counted and scope-checked as an API key is
 * (auth/authenticate.ts). A form post from another site, a missing or dead session and a refused
 * key are answered with their page instead, and the handler does not run.
 */
import { Elysia } from 'elysia'
import type { Authenticator, Caller } from '../../auth/authenticate.ts'
import { nowSeconds, type Scope } from '../../domain.ts'
import { invalidApiKey } from '../../errors.ts'
import type { SessionStore } from '../../store/store.ts'
import { seeOther } from './layout.ts'
import { forbiddenOrigin, refusalPage } from './refusal-page.ts'
import { fromThisOrigin, readSessionId, sessionHash } from './session.ts'

/** The scope a page needs, and what a visitor with no session cookie sees (the sign-in by default). */
export type SessionRule = Scope | { need: Scope; signedOut: () => Response }

export interface SignedInDeps {
  auth: Authenticator
  store: SessionStore
}

/** The caller the cookie's session stands for, or the page to show instead. */
async function findSignedIn(
  deps: SignedInDeps,
  request: Request,
  rule: SessionRule,
  headers: Record<string, string>,
): Promise<Caller | Response> {
  const need = typeof rule === 'string' ? rule : rule.need
  // Every form post must come from a page of this origin (session.ts).
  if (request.method === 'POST' && !fromThisOrigin(request)) return forbiddenOrigin()
  const id = readSessionId(request)
  if (!id) return typeof rule === 'string' ? seeOther('/') : rule.signedOut()
  try {
    const found = await deps.store.findSession(sessionHash(id), nowSeconds())
    if (!found) throw invalidApiKey('signed out, expired or revoked session')
    return await deps.auth.authorize(found, need, headers)
  } catch (error) {
    return refusalPage(error, request, headers)
  }
}

export function signedInMacro(deps: SignedInDeps) {
  return new Elysia().macro({
    signedIn: (rule: SessionRule) => ({
      async resolve({ request, status }) {
        // The page's own headers, not the context's: each answer is built with them explicitly.
        const pageHeaders: Record<string, string> = {}
        const found = await findSignedIn(deps, request, rule, pageHeaders)
        if (found instanceof Response) return status(found.status, found)
        return { caller: found, pageHeaders }
      },
    }),
  })
}
