/**
 * The cost ceiling is a true upper bound (docs/money-and-limits.md), over real HTTP: a line's dry-run quote
 * covers what the simulator then received for it — the one output limit sent, every byte of the
 * body, each image at its model's catalog bound.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { measureSent, priceTokens, sentTokens } from '../helpers/sent-bound.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

type Batch = {
  id: string
  status: string
  cost_usd: string
  cost_ceiling_usd: string
  request_counts: Record<string, number>
}

const VISION_IMAGE_TOKENS = 48_169
const DEFAULT_IMAGE_TOKENS = 50_000

/** The test catalog plus a vision model with its own per-image bound. */
function catalog(openai: string, anthropic: string) {
  const file = testCatalog({ openai, anthropic })
  file.models.push({
    id: 'sim/vision',
    endpoints: ['chat'],
    context_tokens: 128000,
    max_output_tokens: 16384,
    image_input_tokens: VISION_IMAGE_TOKENS,
    offerings: [
      {
        provider: 'sim',
        upstream_model: 'sim-vision',
        input_usd_per_mtok: '0.15',
        output_usd_per_mtok: '0.60',
      },
    ],
  } as (typeof file.models)[number])
  return file
}

const models: Record<
  string,
  {
    kind: 'openai' | 'anthropic'
    prices: { input: string; output: string }
    maxOutput: number
    imageTokens: number
  }
> = {
  'sim/chat': {
    kind: 'openai',
    prices: { input: '0.50', output: '1.50' },
    maxOutput: 4096,
    imageTokens: DEFAULT_IMAGE_TOKENS,
  },
  'sim/claude': {
    kind: 'anthropic',
    prices: { input: '3', output: '15' },
    maxOutput: 8192,
    imageTokens: DEFAULT_IMAGE_TOKENS,
  },
  'sim/vision': {
    kind: 'openai',
    prices: { input: '0.15', output: '0.60' },
    maxOutput: 16384,
    imageTokens: VISION_IMAGE_TOKENS,
  },
}

const line = (id: string, body: Record<string, unknown>) => ({
  custom_id: id,
  method: 'POST',
  url: '/v1/chat/completions',
  body,
})

// A 4 KB legacy function definition, which the old allow-list did not count.
const functions = [
  {
    name: 'file_ticket',
    description: 'Files a support ticket. '.repeat(40),
    parameters: {
      type: 'object',
      properties: Object.fromEntries(
        Array.from({ length: 40 }, (_, i) => [
          `field_${i}`,
          { type: 'string', description: `the ticket's field number ${i}, in full` },
        ]),
      ),
    },
  },
]
const pixel =
  'data:image/png;base64,' +
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='.repeat(
    40,
  )

const cases: [string, string, Record<string, unknown>][] = [
  [
    'both token parameters, to Anthropic',
    'sim/claude',
    {
      model: 'sim/claude',
      messages: [{ role: 'user', content: 'Say a lot.' }],
      max_completion_tokens: 1,
      max_tokens: 8000,
    },
  ],
  [
    "no token limit, to Anthropic: the model's output limit is sent and priced",
    'sim/claude',
    { model: 'sim/claude', messages: [{ role: 'user', content: 'Say a lot.' }] },
  ],
  [
    'both token parameters, to an OpenAI-compatible server',
    'sim/chat',
    {
      model: 'sim/chat',
      messages: [{ role: 'user', content: 'Say a lot.' }],
      max_completion_tokens: 1,
      max_tokens: 4000,
    },
  ],
  [
    'legacy functions, function_call, prediction and an unknown field',
    'sim/chat',
    {
      model: 'sim/chat',
      messages: [{ role: 'user', content: 'File it.' }],
      max_tokens: 8,
      functions,
      function_call: { name: 'file_ticket' },
      prediction: { type: 'content', content: 'x'.repeat(2000) },
      metadata_blob: 'y'.repeat(3000),
    },
  ],
  [
    "images at the model's catalog bound",
    'sim/vision',
    {
      model: 'sim/vision',
      max_tokens: 8,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in these?' },
            { type: 'image_url', image_url: { url: pixel, detail: 'high' } },
            { type: 'image_url', image_url: { url: 'https://example.invalid/a.png' } },
          ],
        },
      ],
    },
  ],
  [
    'images to Anthropic at the default bound, with a system prompt and tools',
    'sim/claude',
    {
      model: 'sim/claude',
      max_tokens: 8,
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Look.' },
            { type: 'image_url', image_url: { url: pixel } },
          ],
        },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'noop', parameters: { type: 'object', properties: {} } },
        },
      ],
    },
  ],
]

for (const storeKind of STORES) {
  describe(`the cost ceiling covers what is sent (${storeKind})`, () => {
    let sim: Simulator
    let claude: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ keepBodies: 50 })
      claude = await startSimulator({ keepBodies: 50 })
      gw = await startTestGateway({
        store: storeKind,
        catalog: catalog(`${sim.url}/v1`, claude.url),
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
      await claude?.stop()
    })

    for (const [name, model, body] of cases) {
      test(name, async () => {
        const { key } = await gw.newAccount('100')
        const file = jsonl([line('only', body)])
        const quoted = await gw.request('/v1/batches?dry_run=true', key, {
          method: 'POST',
          body: file,
        })
        expect(quoted.status).toBe(200)
        const quote = ((await quoted.json()) as { cost_ceiling_usd: string }).cost_ceiling_usd
        const upstream = models[model]!.kind === 'anthropic' ? claude : sim
        const before = upstream.received().length
        const created = (await (
          await gw.request('/v1/batches', key, { method: 'POST', body: file })
        ).json()) as Batch
        const done = await waitFor('the batch to finish', async () => {
          const batch = (await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as Batch
          return FINAL_BATCH.includes(batch.status) ? batch : null
        })
        expect(done.status).toBe('completed')
        const seen = upstream.received().slice(before)
        expect(seen).toHaveLength(1)
        const { kind, prices, maxOutput, imageTokens } = models[model]!
        const sent = measureSent(JSON.parse(seen[0]!.text), kind)
        const bound = priceTokens(sentTokens(sent, imageTokens, maxOutput), prices)
        // What the upstream saw, priced pessimistically, is within the quote (and what was held).
        expect(bound.lessThanOrEqualTo(quote)).toBe(true)
        expect(new Decimal(created.cost_ceiling_usd).equals(quote)).toBe(true)
        if (name.startsWith('both token parameters')) expect(sent.limit).toBe(1) // max_completion_tokens wins
        if (name.startsWith('images')) expect(sent.images).toBeGreaterThan(0)
        if (name.startsWith('no token limit')) {
          // SPEC §5: the model's output limit when the line sets none, sent and priced alike.
          expect(sent.limit).toBe(maxOutput)
          expect(quote).toBe(bound.toDecimalPlaces(6, Decimal.ROUND_UP).toFixed(6))
        }
      })
    }

    test('a live call with both token parameters goes out with the one the balance check priced', async () => {
      // Priced for 1 output token: (bytes + 7) × 3 + 1 × 15 µ$, well under 0.01; 8000 would be 0.12.
      const { key } = await gw.newAccount('0.01')
      const before = claude.received().length
      const response = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/claude',
          messages: [{ role: 'user', content: 'Say a lot.' }],
          max_completion_tokens: 1,
          max_tokens: 8000,
        }),
      })
      expect(response.status).toBe(200)
      const sent = measureSent(JSON.parse(claude.received().slice(before)[0]!.text), 'anthropic')
      expect(sent.limit).toBe(1)
    })
  })
}
