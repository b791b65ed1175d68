/**
 * The cost ceiling bounds what every adapter sends (docs/money-and-limits.md), as a property (fast-check): for
 * generated chat lines — both token parameters, n, tools, legacy functions and function_call,
 * images, prediction, unknown fields, streaming — the body each offering's adapter builds, with
 * the adapters' own request-building functions, measured from the sent side
 * (test/helpers/sent-bound.ts), is within the token bounds the validator counted: prompt bytes
 * (image payloads aside) + overheads + images × the model's catalog bound ≤ the input bound, and
 * the one limit sent × n ≤ the output bound. And with token classes (docs/pricing.md): whatever split of
 * those tokens into uncached, cache-read, 5-minute and (for lines asking a 1-hour TTL) 1-hour
 * writes the upstream reports, at whichever tier its prompt size selects, costs no more than the
 * ceiling priced at the rates the validator chose.
 */
import { expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import fc from 'fast-check'
import { prepareAnthropicBody } from '../../providers/anthropic/prepare-anthropic-body.ts'
import {
  prepareOpenAIBody,
  prepareOpenAIStreamBody,
} from '../../providers/openai/prepare-openai-body.ts'
import { imageInputTokens, limitsOf } from '../../src/catalog/catalog-file.ts'
import type { UpstreamTarget } from '../../providers/prepare-for-offering.ts'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
import { validateBody } from '../../src/ingest/validate-body.ts'
import { priceOf } from '../../src/pricing/ceiling.ts'
import { asksOneHourCache } from '../../src/pricing/ceiling-rates.ts'
import { priceUsage } from '../../src/pricing/price-usage.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { measureSent, sentTokens } from '../helpers/sent-bound.ts'

function catalogForTests() {
  const file = testCatalog({ openai: 'http://127.0.0.1:9/v1' })
  file.models.push({
    id: 'sim/vision',
    endpoints: ['chat'],
    context_tokens: 128000,
    max_output_tokens: 16384,
    image_input_tokens: 48169,
    offerings: [
      {
        provider: 'sim',
        upstream_model: 'sim-vision-with-a-much-longer-upstream-name',
        input_usd_per_mtok: '0.15',
        output_usd_per_mtok: '0.60',
        max_tokens_param: 'max_completion_tokens',
      },
      {
        provider: 'sim-anthropic',
        upstream_model: 'claude-vision',
        input_usd_per_mtok: '3',
        output_usd_per_mtok: '15',
      },
    ],
  } as (typeof file.models)[number])
  // Cache and long-context rates on every chat offering (writes dearer than input, a tier a
  // generated prompt can pass), so the ceiling must take the highest class and tier.
  for (const model of file.models) {
    for (const offering of model.offerings as Record<string, unknown>[]) {
      const input = Number(offering.input_usd_per_mtok)
      Object.assign(offering, {
        cached_input_usd_per_mtok: String(input / 10),
        cache_write_usd_per_mtok: String(input * 1.25),
        cache_write_1h_usd_per_mtok: String(input * 2),
        long_context: {
          above_input_tokens: 300,
          input_usd_per_mtok: String(input * 2),
          output_usd_per_mtok: String(Number(offering.output_usd_per_mtok ?? 0) * 1.5),
          cache_write_1h_usd_per_mtok: String(input * 4),
        },
      })
    }
  }
  const config = loadConfig({
    MULTIGRID_CONFIG: writeCatalog(file),
    MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
  })
  return createCatalog(config.catalog, config.providerKeys)
}
const catalog = catalogForTests()

const text = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom('"\\\n\u0000', 'é'.repeat(30), '🙂'.repeat(10)),
)
const imageUrl = fc.oneof(
  fc.base64String({ maxLength: 400 }).map((data) => `data:image/png;base64,${data}`),
  fc.webUrl(),
)
const cacheControl = fc.constantFrom(
  undefined,
  { type: 'ephemeral' },
  { type: 'ephemeral', ttl: '5m' },
  { type: 'ephemeral', ttl: '1h' },
)
const withCache = <T extends object>(item: T, cache: object | undefined) =>
  cache === undefined ? item : { ...item, cache_control: cache }
const part = fc.oneof(
  fc.tuple(text, cacheControl).map(([t, cache]) => withCache({ type: 'text', text: t }, cache)),
  fc
    .record(
      { url: imageUrl, detail: fc.constantFrom(undefined, 'low', 'high', 'auto') },
      { requiredKeys: ['url'] },
    )
    .map((image) => ({ type: 'image_url', image_url: image })),
)
const content = fc.oneof(text, fc.array(part, { minLength: 1, maxLength: 4 }))
const toolCall = fc.record({
  id: fc.string({ minLength: 1, maxLength: 8 }),
  type: fc.constant('function'),
  // Numbers JSON.parse re-prints longer (1e21 → 1e+21, 1E5 → 100000) must be counted as sent.
  function: fc.record({
    name: fc.string({ minLength: 1, maxLength: 8 }),
    arguments: fc.oneof(fc.json({ maxDepth: 2 }), fc.constantFrom('{"a":1e21}', '[1E5,2e9,-0.0]')),
  }),
})
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'developer', 'user'), content }),
  fc.record({ role: fc.constant('user'), content, name: fc.string({ maxLength: 8 }) }),
  fc.record({
    role: fc.constant('assistant'),
    content: fc.option(text, { nil: null }),
    tool_calls: fc.array(toolCall, { minLength: 1, maxLength: 2 }),
  }),
  fc.record({ role: fc.constant('assistant'), content: text }),
  fc.record({
    role: fc.constant('tool'),
    content: text,
    tool_call_id: fc.string({ minLength: 1, maxLength: 8 }),
  }),
)
const schema = fc
  .jsonValue({ maxDepth: 3 })
  .map((value) => ({ type: 'object', properties: { x: value } }))
const tool = fc
  .tuple(
    fc.record({
      type: fc.constant('function'),
      function: fc.record(
        { name: fc.string({ minLength: 1, maxLength: 10 }), description: text, parameters: schema },
        { requiredKeys: ['name'] },
      ),
    }),
    cacheControl,
  )
  .map(([t, cache]) => withCache(t, cache))
const fn = fc.record({
  name: fc.string({ minLength: 1, maxLength: 10 }),
  description: text,
  parameters: schema,
})

const body = fc.record(
  {
    model: fc.constantFrom('sim/chat', 'sim/claude', 'sim/multi', 'sim/vision'),
    messages: fc.array(message, { minLength: 1, maxLength: 5 }),
    max_tokens: fc.integer({ min: 1, max: 2048 }),
    max_completion_tokens: fc.integer({ min: 1, max: 2048 }),
    n: fc.integer({ min: 1, max: 8 }),
    tools: fc.array(tool, { maxLength: 2 }),
    functions: fc.array(fn, { minLength: 1, maxLength: 2 }),
    function_call: fc.oneof(
      fc.constantFrom('auto', 'none'),
      fc.record({ name: fc.string({ maxLength: 10 }) }),
    ),
    prediction: text.map((t) => ({ type: 'content', content: t })),
    stream: fc.boolean(),
    stop: fc.oneof(text, fc.array(text, { maxLength: 4 })),
    user: text,
    unknown_field: fc.jsonValue({ maxDepth: 3 }),
    provider: fc.record({
      order: fc.constant(['sim-anthropic', 'sim']),
      allow_fallbacks: fc.boolean(),
    }),
  },
  { requiredKeys: ['model', 'messages'] },
)

/** What the adapter of `kind` sends for this body to one offering: its own request-building code. */
function sentBody(
  kind: 'openai' | 'anthropic',
  body: Record<string, unknown>,
  target: UpstreamTarget,
) {
  const stream = body.stream === true
  if (kind === 'openai')
    return stream ? prepareOpenAIStreamBody(body, target) : prepareOpenAIBody(body, target)
  const converted = prepareAnthropicBody('chat', body, target, { stream })
  return converted.ok ? converted.body : null
}

test('what each adapter sends is within the ceiling the validator counted', () => {
  let checked = 0
  fc.assert(
    fc.property(body, (raw) => {
      const verdict = validateBody(raw, 'chat', catalog, { prefix: 'body', live: true })
      if (!verdict.ok) return // not admitted: nothing is sent
      const { model, offerings, inputTokens, outputTokens } = verdict.value
      for (const offering of offerings) {
        const kind = catalog.provider(offering.provider)!.kind
        // As src/upstream/upstreams.ts hands it to the adapter.
        const sent = sentBody(kind, verdict.value.body, {
          model: offering.upstream_model,
          maxTokensParam: offering.max_tokens_param,
          modelLimits: limitsOf(model),
        })
        if (sent === null) continue // the adapter refuses it unsent (e.g. n > 1 to Anthropic)
        const measured = measureSent(JSON.parse(JSON.stringify(sent)), kind)
        const bound = sentTokens(measured, imageInputTokens(model), model.max_output_tokens)
        expect(bound.input).toBeLessThanOrEqual(inputTokens)
        expect(bound.output).toBeLessThanOrEqual(outputTokens)
        // Every token class split of the most it can send, at its tier, within the ceiling.
        const ceiling = priceOf({ input: inputTokens, output: outputTokens }, verdict.value.rates)
        const oneHour = kind === 'anthropic' && asksOneHourCache(verdict.value.body)
        for (const [read, write, write1h] of splits) {
          const usage = classUsage(bound.input, bound.output, read, write, oneHour ? write1h : 0)
          expect(new Decimal(priceUsage(usage, offering)).lte(ceiling)).toBe(true)
        }
        checked++
      }
    }),
    { numRuns: 1_500, interruptAfterTimeLimit: 10_000, seed: 14 },
  )
  expect(checked).toBeGreaterThan(200)
})

/** Fractions of the prompt read from the cache, written for 5 minutes, and for an hour. */
const splits = [
  [0, 0, 0],
  [1, 0, 0],
  [0, 1, 0],
  [0, 0, 1],
  [0.2, 0.3, 0.5],
  [0.5, 0.5, 0],
]

function classUsage(prompt: number, output: number, read: number, write: number, write1h: number) {
  const cached = Math.floor(prompt * read)
  const written = Math.min(Math.floor(prompt * write), prompt - cached)
  const written1h = Math.min(Math.floor(prompt * write1h), prompt - cached - written)
  return {
    input_tokens: prompt,
    output_tokens: output,
    cached_input_tokens: cached,
    cache_write_tokens: written,
    cache_write_1h_tokens: written1h,
  }
}
