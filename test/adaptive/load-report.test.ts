/**
 * vLLM's load signals as the gateway reads them (providers/load-report.ts), and as the simulator's
 * GPU-pool mode sends them: the `endpoint-load-metrics` answer header (ORCA, TEXT or JSON, only
 * when asked with `endpoint-load-metrics-format`) and the /metrics queue gauge.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { waitingFromLoadHeader, waitingFromMetrics } from '../../providers/load-report.ts'
import { startSimulator } from '../../src/simulator/server.ts'

describe('reading the load report', () => {
  test('TEXT and JSON forms of endpoint-load-metrics, as vLLM writes them', () => {
    expect(
      waitingFromLoadHeader(
        'TEXT named_metrics.kv_cache_usage_perc=0.4, named_metrics.num_requests_waiting=3.0',
      ),
    ).toBe(3)
    expect(
      waitingFromLoadHeader(
        'JSON {"named_metrics": {"kv_cache_usage_perc": 0.4, "num_requests_waiting": 7.0}}',
      ),
    ).toBe(7)
    expect(waitingFromLoadHeader('TEXT named_metrics.kv_cache_usage_perc=0.4')).toBeNull()
    expect(waitingFromLoadHeader('BIN CgQIARAB')).toBeNull()
    expect(waitingFromLoadHeader('JSON {not json')).toBeNull()
    expect(waitingFromLoadHeader('TEXT named_metrics.num_requests_waiting=-1')).toBeNull()
    expect(waitingFromLoadHeader(null)).toBeNull()
  })

  test('the /metrics gauge: summed over engines, other names sharing its prefix ignored', () => {
    const page = [
      '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
      '# TYPE vllm:num_requests_waiting gauge',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0',
      'vllm:num_requests_waiting{engine="1",model_name="a}b"} 3.0',
      'vllm:num_requests_waiting_by_reason{reason="x"} 50.0',
      'vllm:num_requests_running{engine="0",model_name="m"} 8.0',
    ].join('\n')
    expect(waitingFromMetrics(page)).toBe(5)
    expect(waitingFromMetrics('vllm:num_requests_waiting 4\n')).toBe(4)
    expect(waitingFromMetrics('# nothing here\nfoo 1\n')).toBeNull()
  })
})

describe('the simulator sends the load report when asked', () => {
  const started = startSimulator({ gpuCapacity: 1, latencyMs: 150 })
  afterAll(async () => (await started).stop())

  const call = async (url: string, format: string | null) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(format ? { 'endpoint-load-metrics-format': format } : {}),
      },
      body: JSON.stringify({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }] }),
    })

  test('TEXT with the queue behind the answer; JSON when asked so; nothing when not asked', async () => {
    const sim = await started
    // Three at once on a capacity of 1: the first answers with two waiting behind it.
    const answers = await Promise.all([
      call(sim.url, 'text'),
      call(sim.url, 'text'),
      call(sim.url, 'text'),
    ])
    const reports = answers.map((a) => a.headers.get('endpoint-load-metrics'))
    expect(reports[0]).toBe(
      'TEXT named_metrics.kv_cache_usage_perc=1.0, named_metrics.num_requests_waiting=2.0',
    )
    expect(reports.map(waitingFromLoadHeader)).toEqual([2, 1, 0])
    const json = (await call(sim.url, 'json')).headers.get('endpoint-load-metrics')
    expect(json).toBe('JSON {"named_metrics":{"kv_cache_usage_perc":1,"num_requests_waiting":0}}')
    expect((await call(sim.url, null)).headers.get('endpoint-load-metrics')).toBeNull()
    expect(sim.stats().peakWaiting).toBe(2)
  })
})
