/**
 * What judging a structured answer costs (docs/structured-outputs.md): an ordinary schema's answers judged
 *   - in-process, on the calling thread, as the gateway did before schema threads: the raw limit;
 *   - through the schema threads (src/schemas/schema-checks.ts), one answer at a time (the latency
 *     one line sees) and many at once (as the dispatcher sends them), with the event loop's own
 *     CPU per answer;
 * (CPU from the thread's own schedstat on Linux: on a shared machine wall times include waiting
 * for a core) then an ordinary structured batch through a gateway and the simulator: json_schema lines (judged
 * on the threads) against the same lines with json_object (judged on the loop, a parse alone).
 *
 *   bun bench/schema-check.ts [--answers 5000] [--lines 2000] [--runs 3] [--answers-only]
 */
import { parseArgs } from 'node:util'
import { createSchemaChecks } from '../src/schemas/schema-checks.ts'
import { structuredAnswerProblem } from '../src/schemas/structured-answer.ts'
import { ownCpuNs } from '../src/schemas/thread-cpu.ts'
import { startSimulator } from '../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway } from '../test/helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../test/helpers/wait.ts'

const { values } = parseArgs({
  options: {
    answers: { type: 'string', default: '5000' },
    lines: { type: 'string', default: '2000' },
    runs: { type: 'string', default: '3' },
    /** Only the per-answer figures, no batches. */
    'answers-only': { type: 'boolean', default: false },
  },
})
const ANSWERS = Number(values.answers)
const LINES = Number(values.lines)
const RUNS = Number(values.runs)

const SCHEMA = {
  type: 'object',
  properties: {
    label: { type: 'string', enum: ['bug', 'question', 'feature'] },
    priority: { type: 'integer', minimum: 1, maximum: 5 },
    summary: { type: 'string', maxLength: 200 },
    tags: { type: 'array', items: { type: 'string', pattern: '^[^\\n]*$' }, maxItems: 5 },
  },
  required: ['label', 'priority', 'summary'],
  additionalProperties: false,
}
const FORMAT = { type: 'json_schema', json_schema: { name: 'triage', schema: SCHEMA } }
const CONTENT = JSON.stringify({
  label: 'bug',
  priority: 2,
  summary: 'the export button does nothing on the second click',
  tags: ['export', 'ui'],
})
const response = {
  choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: CONTENT } }],
}
const job = {
  text: JSON.stringify(SCHEMA),
  name: 'triage',
  choices: [{ finishReason: 'stop', content: CONTENT, refusal: null }],
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const mainCpuMs = () => (ownCpuNs() ?? 0) / 1e6
const us = (ms: number) => `${(ms * 1000).toFixed(1)} µs`

async function perAnswer() {
  // Warm both paths: the JIT, Ajv's compiled schema on each thread.
  for (let i = 0; i < 2000; i++) structuredAnswerProblem(FORMAT, response)
  const checks = createSchemaChecks({ budgetMs: 100 })
  await Promise.all(Array.from({ length: 2000 }, () => checks.judge(job, 'bench')))
  const inline: number[] = []
  const inlineCpu: number[] = []
  const sequential: number[] = []
  const concurrent: number[] = []
  const loopCpu: number[] = []
  for (let run = 0; run < RUNS; run++) {
    let started = performance.now()
    const before = mainCpuMs()
    for (let i = 0; i < ANSWERS; i++) structuredAnswerProblem(FORMAT, response)
    inline.push((performance.now() - started) / ANSWERS)
    inlineCpu.push((mainCpuMs() - before) / ANSWERS)
    started = performance.now()
    for (let i = 0; i < ANSWERS / 10; i++) await checks.judge(job, 'bench')
    sequential.push((performance.now() - started) / (ANSWERS / 10))
    const cpu = mainCpuMs()
    started = performance.now()
    await Promise.all(Array.from({ length: ANSWERS }, () => checks.judge(job, 'bench')))
    concurrent.push((performance.now() - started) / ANSWERS)
    loopCpu.push((mainCpuMs() - cpu) / ANSWERS)
  }
  await checks.close()
  console.log(`judging one answer of an ordinary schema (median of ${RUNS} runs):`)
  console.log(`  in-process (the old way, the raw limit):   ${us(median(inline))}`)
  console.log(`    of which the event loop's CPU:            ${us(median(inlineCpu))}`)
  console.log(`  schema thread, one at a time (latency):     ${us(median(sequential))}`)
  console.log(`  schema threads, ${ANSWERS} at once (wall):     ${us(median(concurrent))}`)
  console.log(`    of which the event loop's CPU:            ${us(median(loopCpu))}`)
}

async function batchRun(format: unknown) {
  const sim = await startSimulator({ latencyMs: 5 })
  const gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1` },
    env: { MULTIGRID_POLL_MS: '20', LOG_LEVEL: 'error' },
  })
  try {
    const { key } = await gw.newAccount('1000')
    const lines = Array.from({ length: LINES }, (_, i) =>
      chatLine(`l${i}`, `triage ticket ${i}`, { response_format: format, max_tokens: 64 }),
    )
    const started = performance.now()
    const created = await gw.request('/v1/batches', key, {
      method: 'POST',
      headers: { 'content-type': 'application/jsonl' },
      body: jsonl(lines),
    })
    const { id } = (await created.json()) as { id: string }
    const done = await waitFor(
      id,
      async () => {
        const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
          request_counts: { succeeded: number }
        }
        return FINAL_BATCH.includes(batch.status) ? batch : null
      },
      300_000,
    )
    if (done.request_counts.succeeded !== LINES) throw new Error(`${id}: ${JSON.stringify(done)}`)
    return LINES / ((performance.now() - started) / 1000)
  } finally {
    await gw.stop()
    await sim.stop()
  }
}

async function batches() {
  const schema: number[] = []
  const object: number[] = []
  for (let run = 0; run < RUNS; run++) {
    // Alternated, so a change in the machine's load falls on both.
    schema.push(await batchRun(FORMAT))
    object.push(await batchRun({ type: 'json_object' }))
  }
  const a = median(schema)
  const b = median(object)
  console.log(`an ordinary structured batch of ${LINES} lines (median of ${RUNS} runs, lines/s):`)
  console.log(`  json_object (judged on the loop):          ${b.toFixed(0)}`)
  console.log(`  json_schema (judged on schema threads):    ${a.toFixed(0)}`)
  console.log(`  difference:                                ${(((a - b) / b) * 100).toFixed(1)}%`)
}

await perAnswer()
if (!values['answers-only']) await batches()
process.exit(0)
