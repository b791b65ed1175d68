/**
 * A live call whose ceiling is $0 (a model served only by an offering priced "0", as an
 * operator's own pool often is, and so its adapters): nothing to hold, so it is answered, never
 * 402 (docs/live.md: refused only when the ceiling does not fit the available credit), and costs nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'

for (const store of STORES) {
  describe(`live calls on a free offering (${store})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 2 })
      const catalog = testCatalog({ openai: `${sim.url}/v1` })
      catalog.models.push({
        id: 'sim/free',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        aliases: [],
        offerings: [
          {
            provider: 'sim',
            upstream_model: 'sim-chat',
            input_usd_per_mtok: '0',
            output_usd_per_mtok: '0',
          },
        ],
      } as (typeof catalog.models)[number])
      gw = await startTestGateway({ store, catalog, env: { MULTIGRID_DISPATCH: '0' } })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as {
        balance_usd: string
        held_usd: string
      }

    for (const stream of [false, true]) {
      test(`a $0 call${stream ? ', streamed,' : ''} is answered and costs nothing`, async () => {
        const { key, accountId } = await gw.newAccount('1')
        for (let i = 0; i < 3; i++) {
          const response = await gw.request('/v1/chat/completions', key, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              model: 'sim/free',
              messages: [{ role: 'user', content: `free ${i}` }],
              max_tokens: 16,
              stream,
            }),
          })
          expect(response.status).toBe(200)
          const text = await response.text()
          expect(text).toContain(stream ? 'data: [DONE]' : '"chat.completion"')
        }
        await gw.credit.flush()
        expect(await account(accountId)).toMatchObject({ balance_usd: '1.000000' })
      })
    }
  })
}
