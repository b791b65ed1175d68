/**
 * Fine-tunes (docs/open-models.md) over real HTTP: the admin API that registers, lists and
 * deactivates them; `ft:` ids in lines and live calls (one model_not_found for unknown, another
 * account's and inactive ids); the base model's limits on one batch; the model lists; fine-tune
 * lines run on the LoRA pool and priced as their base.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import OpenAI, { toFile } from 'openai'
import { accountTag } from '../../src/catalog/fine-tunes.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { LORA_BASE, LORA_UPSTREAM_MODEL, loraCatalog } from '../helpers/lora-catalog.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

type FineTuneModel = {
  id: string
  object: string
  parent: string
  status: string
  [k: string]: unknown
}
type Issue = { line: number; path: string; message: string; fix: string; code?: string }

for (const storeKind of STORES) {
  describe(`fine-tunes (${storeKind})`, () => {
    let sims: Simulator[]
    let gw: TestGateway

    beforeAll(async () => {
      sims = await Promise.all(
        [0, 1].map(() =>
          startSimulator({ latencyMs: 2, maxLoras: 2, models: [LORA_UPSTREAM_MODEL] }),
        ),
      )
      gw = await startTestGateway({
        store: storeKind,
        catalog: loraCatalog(sims.map((sim) => `${sim.url}/v1`)),
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await Promise.all(sims.map((sim) => sim.stop()))
    })

    const register = (accountId: string, body: Record<string, unknown>) =>
      gw.admin(`/accounts/${accountId}/adapters`, {
        body: { base_model: LORA_BASE, rank: 32, size_mib: 100, source: '/srv/lora/x', ...body },
      })
    const registered = async (accountId: string, body: Record<string, unknown>) => {
      const response = await register(accountId, body)
      expect(response.status).toBe(201)
      return (await response.json()) as FineTuneModel
    }
    const submit = (key: string, lines: unknown[], query = '') =>
      gw.request(`/v1/batches${query}`, key, {
        method: 'POST',
        body: jsonl(lines),
        headers: { 'content-type': 'application/jsonl' },
      })
    const issuesOf = async (response: Response) => {
      expect(response.status).toBe(400)
      const body = (await response.json()) as { error: { code: string }; issues: Issue[] }
      expect(body.error.code).toBe('invalid_batch_file')
      return body.issues
    }
    const line = (id: string, model: string) => chatLine(id, `hello ${id}`, {}, model)

    test('registers a fine-tune: 201 with its ft: id and parent, listed, deactivated by its URL-encoded id', async () => {
      const { accountId } = await gw.newAccount('1')
      const fineTune = await registered(accountId, { name: 'support-v3', rank: 32, size_mib: 160 })
      expect(fineTune).toMatchObject({
        id: `ft:lora-base:${accountTag(accountId)}:support-v3`,
        object: 'model',
        parent: LORA_BASE,
        status: 'active',
        rank: 32,
        size_mib: 160,
        source: '/srv/lora/x',
      })
      const listed = (await (await gw.admin(`/accounts/${accountId}/adapters`)).json()) as {
        data: FineTuneModel[]
      }
      expect(listed.data.map((a) => a.id)).toEqual([fineTune.id])

      const gone = await gw.admin(`/adapters/${encodeURIComponent(fineTune.id)}`, {
        method: 'DELETE',
      })
      expect(gone.status).toBe(200)
      expect(((await gone.json()) as FineTuneModel).status).toBe('inactive')
      const after = (await (await gw.admin(`/accounts/${accountId}/adapters`)).json()) as {
        data: FineTuneModel[]
      }
      expect(after.data.map((a) => [a.id, a.status])).toEqual([[fineTune.id, 'inactive']])
      const unknown = await gw.admin(`/adapters/${encodeURIComponent('ft:nope:0:x')}`, {
        method: 'DELETE',
      })
      expect(unknown.status).toBe(404)
    })

    test('refuses a registration with a 4xx that names what was wrong', async () => {
      const { accountId } = await gw.newAccount('1')
      const refusal = async (
        body: Record<string, unknown>,
        status: number,
        account = accountId,
      ) => {
        const response = await register(account, body)
        expect(response.status).toBe(status)
        return (
          (await response.json()) as {
            error: { code: string; param: string | null; message: string }
          }
        ).error
      }
      expect(await refusal({ name: 'a', base_model: 'vendor/nothing' }, 400)).toMatchObject({
        param: 'base_model',
        // Read after the field's name: "base_model names an unknown model, …".
        message: expect.stringMatching(/^base_model names an unknown model, "vendor\/nothing"; /),
      })
      expect(await refusal({ name: 'a', base_model: 'sim/chat' }, 400)).toMatchObject({
        param: 'base_model',
        message: expect.stringContaining('not served with fine-tunes'),
      })
      expect(await refusal({ name: 'a', rank: 128 }, 400)).toMatchObject({
        param: 'rank',
        message: expect.stringContaining('from 1 to 64'),
      })
      expect((await refusal({ name: 'a', rank: 0 }, 400)).param).toBe('rank')
      expect((await refusal({ name: 'a', rank: 8.5 }, 400)).param).toBe('rank')
      expect((await refusal({ name: 'Not OK:x' }, 400)).param).toBe('name')
      expect(await refusal({ name: 'a', size_mib: 2000 }, 400)).toMatchObject({
        param: 'size_mib',
        message: expect.stringContaining('max_total_mib'),
      })
      expect((await refusal({ name: 'a', source: '' }, 400)).param).toBe('source')
      expect((await refusal({ name: 'a' }, 404, 'acct_missing')).code).toBe('not_found')
      await registered(accountId, { name: 'twice' })
      expect(await refusal({ name: 'twice', rank: 16 }, 409)).toMatchObject({
        code: 'adapter_exists',
        param: 'name',
      })
    })

    test("a line naming an unknown, another account's or an inactive fine-tune: model_not_found, one message for all three", async () => {
      const mine = await gw.newAccount('1')
      const theirs = await gw.newAccount('1')
      const inactive = await registered(mine.accountId, { name: 'old' })
      await gw.admin(`/adapters/${encodeURIComponent(inactive.id)}`, { method: 'DELETE' })
      const foreign = await registered(theirs.accountId, { name: 'theirs' })
      const unknown = `ft:lora-base:${accountTag(mine.accountId)}:never-registered`
      const issues = await issuesOf(
        await submit(mine.key, [line('a', unknown), line('b', foreign.id), line('c', inactive.id)]),
      )
      expect(issues.map((i) => [i.line, i.path, i.code])).toEqual([
        [1, 'body.model', 'model_not_found'],
        [2, 'body.model', 'model_not_found'],
        [3, 'body.model', 'model_not_found'],
      ])
      expect(new Set(issues.map((i) => i.message)).size).toBe(1)
      expect(new Set(issues.map((i) => i.fix)).size).toBe(1)
      // The owner's own lines with it are accepted.
      const ok = await submit(theirs.key, [line('x', foreign.id)], '?dry_run=true')
      expect(ok.status).toBe(200)
    })

    test("a file over any of the base's limits is refused whole, the issue naming the limit", async () => {
      const { accountId, key } = await gw.newAccount('10')
      const many = async (prefix: string, n: number, body: Record<string, unknown>) => {
        const ids: string[] = []
        for (let i = 0; i < n; i++)
          ids.push((await registered(accountId, { name: `${prefix}${i}`, ...body })).id)
        return ids
      }
      const r32 = await many('r32-', 9, { rank: 32, size_mib: 100 })
      const r64 = await many('r64-', 5, { rank: 64, size_mib: 100 })
      const big = await many('big-', 7, { rank: 16, size_mib: 160 })
      const fileOf = (ids: string[]) => [
        line('base', LORA_BASE),
        ...ids.map((id, i) => line(`l${i}`, id)),
      ]
      const limitIssue = async (ids: string[]) => {
        const issues = await issuesOf(await submit(key, fileOf(ids), '?dry_run=true'))
        expect(issues).toHaveLength(1)
        expect(issues[0]).toMatchObject({ path: 'body.model' })
        // model_not_found is docs/open-models.md's code for an id that does not exist, is another account's
        // or is inactive; these fine-tunes are the account's own and active.
        expect(issues[0]!.code).toBeUndefined()
        return issues[0]
      }
      expect((await limitIssue(r32)).message).toContain('max_per_batch')
      expect((await limitIssue(r32)).line).toBe(10)
      expect((await limitIssue(r64)).message).toContain('limits_by_rank')
      expect((await limitIssue(big)).message).toContain('max_total_mib')
      // Up to each limit is fine: 8 of rank 32, 4 of rank 64, 960 MiB.
      for (const ids of [r32.slice(0, 8), r64.slice(0, 4), big.slice(0, 6)]) {
        const response = await submit(key, fileOf(ids), '?dry_run=true')
        expect(response.status).toBe(200)
      }
    })

    test('fine-tune lines run on the LoRA pool under their own id, priced as the base', async () => {
      const { accountId, key } = await gw.newAccount('1')
      const fineTune = await registered(accountId, { name: 'priced', source: '/srv/lora/priced' })
      const created = await submit(key, [line('a', fineTune.id), line('b', LORA_BASE)])
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      const batch = await waitFor(`batch ${id}`, async () => {
        const b = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as any
        return FINAL_BATCH.includes(b.status) ? b : null
      })
      expect(batch.status).toBe('completed')
      const results = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      const [a, b] = results
      expect(a.status).toBe('succeeded')
      expect(a.response.body.model).toBe(fineTune.id)
      expect(b.response.body.model).toBe(LORA_UPSTREAM_MODEL)
      for (const result of results) {
        const usage = result.response.body.usage
        const cost = new Decimal(usage.prompt_tokens)
          .times('0.20')
          .plus(new Decimal(usage.completion_tokens).times('0.60'))
          .div(1e6)
        expect(new Decimal(result.cost_usd).equals(cost)).toBe(true)
      }
      // Loaded from where the operator said, under its id.
      const loaded = sims.flatMap((sim) => sim.lora().loaded)
      expect(loaded).toContain(fineTune.id)
    })

    test("GET /v1/models and /openai/v1/models list the caller's active fine-tunes with parent, in OpenAI's shape", async () => {
      const { accountId, key } = await gw.newAccount('1')
      const other = await gw.newAccount('1')
      const active = await registered(accountId, { name: 'listed' })
      const inactive = await registered(accountId, { name: 'unlisted' })
      await gw.admin(`/adapters/${encodeURIComponent(inactive.id)}`, { method: 'DELETE' })
      const foreign = await registered(other.accountId, { name: 'not-mine' })

      const native = (await (await gw.request('/v1/models', key)).json()) as { data: any[] }
      const ids = native.data.map((m) => m.id)
      expect(ids).toContain(active.id)
      expect(ids).toContain(LORA_BASE)
      expect(ids).not.toContain(inactive.id)
      expect(ids).not.toContain(foreign.id)
      expect(native.data.find((m) => m.id === active.id)).toMatchObject({
        object: 'model',
        owned_by: accountId,
        parent: LORA_BASE,
        created: expect.any(Number),
        endpoints: ['chat'],
        pricing: [{ provider: 'pool', input_usd_per_mtok: '0.20', output_usd_per_mtok: '0.60' }],
      })

      const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
      const listed: any[] = []
      for await (const model of client.models.list()) listed.push(model)
      const mine = listed.find((m) => m.id === active.id)
      expect(mine).toMatchObject({ object: 'model', parent: LORA_BASE })
      expect(typeof mine.created).toBe('number')
      expect(typeof mine.owned_by).toBe('string')
      expect(listed.map((m) => m.id)).not.toContain(foreign.id)
      // One by its id, as listed; another account's is not found, as an unknown one.
      expect(await client.models.retrieve(active.id)).toMatchObject({
        id: active.id,
        parent: LORA_BASE,
      })
      expect(await client.models.retrieve(LORA_BASE)).toMatchObject({
        id: LORA_BASE,
        object: 'model',
      })
      for (const id of [foreign.id, inactive.id]) {
        const error = await client.models.retrieve(id).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.NotFoundError)
        expect((error as { code: string }).code).toBe('model_not_found')
      }
    })

    test('a live call names a fine-tune by its id; an id it cannot use is 404 model_not_found', async () => {
      const { accountId, key } = await gw.newAccount('1')
      const other = await gw.newAccount('1')
      const fineTune = await registered(accountId, { name: 'live' })
      const foreign = await registered(other.accountId, { name: 'live-theirs' })
      const call = (model: string) =>
        gw.request('/v1/chat/completions', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model,
            messages: [{ role: 'user', content: 'hi' }],
            max_tokens: 8,
          }),
        })
      const answered = await call(fineTune.id)
      expect(answered.status).toBe(200)
      expect(((await answered.json()) as { model: string }).model).toBe(fineTune.id)
      const streamed = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: fineTune.id,
          stream: true,
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 8,
        }),
      })
      expect(streamed.status).toBe(200)
      const events = (await streamed.text()).split('\n').filter((l) => l.startsWith('data: {'))
      expect(events.length).toBeGreaterThan(0)
      expect(events.every((e) => JSON.parse(e.slice(6)).model === fineTune.id)).toBe(true)
      const refusals = await Promise.all([foreign.id, 'ft:lora-base:000000000000:none'].map(call))
      const bodies = await Promise.all(refusals.map((r) => r.json() as Promise<any>))
      expect(refusals.map((r) => r.status)).toEqual([404, 404])
      expect(bodies.map((b) => b.error.code)).toEqual(['model_not_found', 'model_not_found'])
      expect(bodies[0].error.message).toBe(bodies[1].error.message)
    })

    test("the facade's batch errors carry model_not_found for a line naming another account's fine-tune", async () => {
      const { key } = await gw.newAccount('1')
      const other = await gw.newAccount('1')
      const foreign = await registered(other.accountId, { name: 'facade-theirs' })
      const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
      const file = await client.files.create({
        file: await toFile(
          Buffer.from(jsonl([line('a', LORA_BASE), line('b', foreign.id)])),
          'in.jsonl',
        ),
        purpose: 'batch',
      })
      const batch = await client.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      expect(batch.status).toBe('failed')
      expect(batch.errors?.data?.map((e) => [e.code, e.line, e.param])).toEqual([
        ['model_not_found', 2, 'body.model'],
      ])
    })
  })
}
