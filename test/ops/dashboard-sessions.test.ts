/**
 * Dashboard sign-in is a server-side session: the cookie holds a random id (never the key),
 * signing out deletes the session so a copied cookie is refused, a revoked key ends its
 * sessions, and sessions expire.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { sessionHash } from '../../src/http/dashboard/session.ts'
import { startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'

for (const storeKind of STORES) {
  describe(`dashboard sessions (${storeKind})`, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({
        store: storeKind,
        env: { MULTIGRID_DISPATCH: '0', MULTIGRID_SESSION_HOURS: '1' },
      })
    })
    afterAll(async () => {
      await gw.stop()
    })

    const form = (path: string, fields: Record<string, string>, cookie?: string) =>
      fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(cookie ? { cookie } : {}),
        },
        body: new URLSearchParams(fields),
        redirect: 'manual',
      })
    const signIn = async (key: string) => {
      const response = await form('/dashboard/sign-in', { key })
      expect(response.status).toBe(303)
      const cookie = response.headers.get('set-cookie')!
      expect(cookie).toContain('HttpOnly')
      expect(cookie).toContain('SameSite=Strict')
      expect(cookie).not.toContain(key)
      return cookie.split(';')[0]!
    }
    const page = (cookie: string) =>
      fetch(`${gw.url}/`, { headers: { cookie }, redirect: 'manual' })
    const idOf = (cookie: string) => cookie.slice(cookie.indexOf('=') + 1)

    test('after sign-out, a copied cookie is refused; another sign-in of the same key keeps working', async () => {
      const { key } = await gw.newAccount('1')
      const cookie = await signIn(key)
      const elsewhere = await signIn(key)
      const copied = cookie
      expect((await page(copied)).status).toBe(200)
      const out = await form('/dashboard/sign-out', {}, cookie)
      expect(out.status).toBe(303)
      expect(out.headers.get('set-cookie')).toContain('Max-Age=0')
      const refused = await page(copied)
      expect(refused.status).toBe(401)
      expect(await refused.text()).toContain('sign in')
      expect(refused.headers.get('set-cookie')).toContain('Max-Age=0')
      expect(
        (
          await fetch(`${gw.url}/dashboard/batches/batch_x`, {
            headers: { cookie: copied },
            redirect: 'manual',
          })
        ).status,
      ).toBe(401)
      expect((await page(elsewhere)).status).toBe(200)
      expect(
        await gw.store.findSession(sessionHash(idOf(cookie)), Math.floor(Date.now() / 1000)),
      ).toBeNull()
    })

    test('the key itself in a cookie signs nobody in', async () => {
      const { key } = await gw.newAccount('1')
      for (const cookie of [`multigrid_key=${key}`, `multigrid_session=${key}`]) {
        const response = await page(cookie)
        expect(await response.text()).not.toContain('<h1>Batches</h1>')
      }
    })

    test('revoking the key ends its sessions; an expired session is refused and swept', async () => {
      const revoked = await gw.newAccount('1')
      const cookie = await signIn(revoked.key)
      expect((await gw.admin(`/keys/${revoked.keyId}`, { method: 'DELETE' })).status).toBe(200)
      expect((await page(cookie)).status).toBe(401)

      const { key } = await gw.newAccount('1')
      const session = await signIn(key)
      const now = Math.floor(Date.now() / 1000)
      // MULTIGRID_SESSION_HOURS=1: an hour on, the session is past its expiry.
      expect(await gw.store.findSession(sessionHash(idOf(session)), now + 3_601)).toBeNull()
      expect((await gw.janitor.runOnce(now + 3_601)).expiredSessions).toBeGreaterThanOrEqual(1)
      expect((await page(session)).status).toBe(401)
    })
  })
}
