/** A run whose usage is known: batch lines routed to a cheaper offering, and live calls. */
import { expect } from 'bun:test'
import Decimal from 'decimal.js'
import { testCatalog } from './catalog.ts'
import { chatLine, jsonl, type TestGateway } from './gateway.ts'
import { waitFor } from './wait.ts'

/** The test catalog and a model whose first listed offering is the dearer one: routing saves. */
export function usageCatalog(simUrl: string) {
  const catalog = testCatalog({ openai: `${simUrl}/v1` }) as any
  catalog.providers['sim-dear'] = { ...catalog.providers.sim }
  catalog.models.push({
    id: 'sim/routed',
    endpoints: ['chat'],
    context_tokens: 32000,
    max_output_tokens: 1024,
    offerings: [
      {
        provider: 'sim-dear',
        upstream_model: 'r',
        input_usd_per_mtok: '2',
        output_usd_per_mtok: '6',
      },
      {
        provider: 'sim',
        upstream_model: 'r',
        input_usd_per_mtok: '0.5',
        output_usd_per_mtok: '1.5',
      },
    ],
  })
  // The test catalog's model the simulator refuses (a 400), by an alias too: failed lines.
  catalog.models.find((model: { id: string }) => model.id === 'sim/refused').aliases = [
    'refused-alias',
  ]
  return catalog
}

export interface RanUsage {
  key: string
  accountId: string
  /** What the account was charged in all: its credit less its balance. */
  charged: Decimal
  /** The tokens the answers reported, batch results and live answers together. */
  input: number
  output: number
  /** The routed lines' usage priced on their first listed offering, less what they cost. */
  saved: Decimal
}

/** Eight lines (six routed to the cheaper offering) and two live calls, one streamed. */
export async function runSomeUsage(gw: TestGateway): Promise<RanUsage> {
  const { key, accountId } = await gw.newAccount('1')
  const lines = [
    ...Array.from({ length: 6 }, (_, i) => chatLine(`r-${i}`, `route ${i}`, {}, 'sim/routed')),
    chatLine('c-1', 'plain one'),
    chatLine('c-2', 'plain two'),
  ]
  const submitted = await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
  expect(submitted.status).toBe(201)
  const { id } = (await submitted.json()) as { id: string }
  await waitFor(
    'the batch to complete',
    async () => {
      const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
        status: string
      }
      return batch.status === 'completed'
    },
    30_000,
  )
  let input = 0
  let output = 0
  let saved = new Decimal(0)
  const results = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  for (const row of results) {
    const usage = row.response.body.usage
    input += usage.prompt_tokens
    output += usage.completion_tokens
    if (row.custom_id.startsWith('r-'))
      saved = saved.plus(
        new Decimal(usage.prompt_tokens)
          .times(2 - 0.5)
          .plus(new Decimal(usage.completion_tokens).times(6 - 1.5))
          .div(1e6),
      )
  }
  for (const stream of [false, true]) {
    const response = await gw.request('/v1/chat/completions', key, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sim/chat',
        messages: [{ role: 'user', content: `live ${stream}` }],
        max_tokens: 20,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
    })
    expect(response.status).toBe(200)
    const text = await response.text()
    const usage = stream
      ? JSON.parse(text.split('\n\n').filter(Boolean).at(-2)!.slice(6)).usage
      : JSON.parse(text).usage
    input += usage.prompt_tokens
    output += usage.completion_tokens
  }
  await Bun.sleep(50)
  await gw.credit.flush()
  const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
    balance_usd: string
  }
  return {
    key,
    accountId,
    charged: new Decimal(1).minus(account.balance_usd),
    input,
    output,
    saved,
  }
}
