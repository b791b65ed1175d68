/**
 * OpenTelemetry (docs/operations.md): spans made by hand at the three seams — the HTTP request, the batch
 * admission and the upstream call — and the gateway's metrics, exported over OTLP/HTTP when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set. Without it no SDK is started and every helper below is a
 * plain pass-through: no span objects, no attribute maps, no timers.
 *
 * Automatic instrumentations are not used: they patch Node's module loader and are unverified
 * under Bun. The SDK registers itself globally (it is one per process); `shutdown` unregisters
 * it again, so a test can start another gateway with telemetry in the same process.
 */
import {
  context,
  diag,
  metrics,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  createNoopMeter,
  type Attributes,
  type Counter,
  type Histogram,
  type Meter,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api'
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http'
import { OTLPMetricExporter as ProtoMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import { PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics'
import { NodeSDK } from '@opentelemetry/sdk-node'
import { GatewayError } from '../errors.ts'
import type { Logger } from './logger.ts'
import type { OtlpConfig } from './otlp-env.ts'
import { withoutKeys } from './without-keys.ts'

export interface TelemetryConfig {
  /** Where traces and metrics go (otlp-env.ts); null: no telemetry. */
  otlp: OtlpConfig | null
  serviceName: string
  /** Receives the SDK's own errors (a collector that cannot be reached), as warnings. */
  logger?: Logger
}

/** The gateway's metric instruments; their names are the contract with dashboards. */
export interface Instruments {
  /** Lines that reached a final state here, by `status` (succeeded / failed): rate = lines/s. */
  linesCompleted: Counter
  /** Seconds per upstream call, by provider, endpoint and outcome. */
  upstreamDuration: Histogram
  /** Failed upstream calls by provider and `error.type` (rate_limited, timeout, …). */
  upstreamErrors: Counter
  /** Tokens reported by upstreams, by provider and `token.type` (input / output). */
  upstreamTokens: Counter
  /** Requests refused for a limit, by `limit` (requests_per_minute / open_batches). */
  rateLimitRejections: Counter
  /** Seconds per HTTP request, by method, route and status. */
  httpDuration: Histogram
}

/** What identifies one upstream call; batch fields are absent for live calls. */
export interface UpstreamCall {
  provider: string
  model: string
  endpoint: string
  batchId?: string
  lineNo?: number
  attempt?: number
}

/** What an upstream call came to, for its span and the metrics. */
export interface UpstreamResult {
  status: number | null
  latencyMs: number
  /** The classified failure (rate_limited, timeout, …); null when the call succeeded. */
  errorKind: string | null
  /** The caller gave up on the call (a client gone, a shutdown): not the provider's failure. */
  callerAborted?: boolean
  usage: { input_tokens: number; output_tokens: number } | null
}

export interface Telemetry {
  readonly enabled: boolean
  readonly tracer: Tracer
  readonly meter: Meter
  readonly instruments: Instruments
  /**
   * Runs one HTTP request inside its server span, so spans made while handling it are its
   * children. `routeOf` is asked at the end: the route is known only once the router matched.
   */
  request(
    request: Request,
    handle: () => Promise<Response>,
    routeOf: () => string | null,
  ): Promise<Response>
  /** Runs an admission inside its span; `describe` turns the result into attributes (batch.id, …). */
  admission<T>(
    attributes: Attributes,
    run: () => Promise<T>,
    describe: (result: T) => Attributes,
  ): Promise<T>
  /**
   * Runs one upstream call inside its client span and records its latency, errors and tokens. A
   * batch line's call is a root span linked to its batch's admission span when this instance
   * admitted it; `batch.id` joins them in any case.
   */
  upstream<T>(
    call: UpstreamCall,
    run: () => Promise<T>,
    describe: (result: T) => UpstreamResult | Promise<UpstreamResult>,
  ): Promise<T>
  lineFinished(status: 'succeeded' | 'failed'): void
  rateLimited(limit: 'requests_per_minute' | 'open_batches' | 'daily_spend'): void
  /** Registers the gauges read at each export: queue depth and lines in flight. */
  observe(gauges: { pendingLines: () => Promise<number>; linesInFlight: () => number }): void
  /** Exports what is buffered and stops the SDK. */
  shutdown(): Promise<void>
}

const NOOP_TRACER = new ProxyTracerProvider().getTracer('multigrid')
const NOOP_METER = createNoopMeter()

/** Batches whose admission span this instance remembers, for span links; oldest dropped first. */
const REMEMBERED_BATCHES = 10_000

/** Starts the SDK when an endpoint is configured; otherwise returns the shared no-op. */
export function createTelemetry(config: TelemetryConfig): Telemetry {
  const { otlp } = config
  if (!otlp) return noTelemetry
  if (config.logger) diag.setLogger(diagToLogger(config.logger))
  const { traces, metrics: exported } = otlp
  const sdk = new NodeSDK({
    // service.name defaults to ours; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES still win.
    resource: defaultResource().merge(
      resourceFromAttributes({ 'service.name': config.serviceName }),
    ),
    // Without an endpoint of its own, a signal goes nowhere (the SDK would try localhost).
    spanProcessors: traces ? undefined : [],
    traceExporter: traces
      ? traces.protocol === 'http/protobuf'
        ? new ProtoTraceExporter({ url: traces.url })
        : new OTLPTraceExporter({ url: traces.url })
      : undefined,
    metricReaders: exported
      ? [
          new PeriodicExportingMetricReader({
            exporter:
              exported.protocol === 'http/protobuf'
                ? new ProtoMetricExporter({ url: exported.url })
                : new OTLPMetricExporter({ url: exported.url }),
            exportIntervalMillis: otlp.metricIntervalMs,
          }),
        ]
      : [],
    logRecordProcessors: [],
    instrumentations: [],
  })
  sdk.start()
  return createActive(sdk, trace.getTracer('multigrid'), metrics.getMeter('multigrid'))
}

/** What an active telemetry's spans need: the SDK's tracer, the instruments, the admissions it remembers. */
interface ActiveState {
  tracer: Tracer
  instruments: Instruments
  /** Admission spans by batch id, for the links of the batch's upstream calls. */
  admitted: Map<string, SpanContext>
}

function createActive(sdk: NodeSDK, tracer: Tracer, meter: Meter): Telemetry {
  const instruments = createInstruments(meter)
  const state: ActiveState = { tracer, instruments, admitted: new Map() }
  let stopped: Promise<void> | null = null
  return {
    enabled: true,
    tracer,
    meter,
    instruments,
    request: (request, handle, routeOf) => traceRequest(state, request, handle, routeOf),
    admission: (attributes, run, describe) => traceAdmission(state, attributes, run, describe),
    upstream: (call, run, describe) => traceUpstream(state, call, run, describe),
    lineFinished(status) {
      instruments.linesCompleted.add(1, { status })
    },
    rateLimited(limit) {
      instruments.rateLimitRejections.add(1, { limit })
    },
    observe: (gauges) => observeGauges(meter, gauges),
    shutdown() {
      stopped ??= sdk.shutdown().finally(() => {
        // NodeSDK leaves its providers registered; clear them so a later start can register.
        trace.disable()
        metrics.disable()
        context.disable()
        propagation.disable()
        diag.disable()
      })
      return stopped
    },
  }
}

function remember(state: ActiveState, batchId: string, span: SpanContext) {
  state.admitted.set(batchId, span)
  if (state.admitted.size > REMEMBERED_BATCHES)
    state.admitted.delete(state.admitted.keys().next().value!)
}

function failSpan(span: Span, error: unknown) {
  const code = (error as { code?: unknown } | null)?.code
  span.setAttribute(
    'error.type',
    typeof code === 'string' ? code : ((error as Error)?.name ?? 'Error'),
  )
  span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message })
}

async function traceRequest(
  { tracer, instruments }: ActiveState,
  request: Request,
  handle: () => Promise<Response>,
  routeOf: () => string | null,
): Promise<Response> {
  const started = performance.now()
  const method = request.method
  // A caller that traces itself (traceparent) gets our spans inside its own trace.
  const parent = propagation.extract(ROOT_CONTEXT, request.headers, HEADER_GETTER)
  const span = tracer.startSpan(
    method,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': method,
        'url.path': withoutKeys(new URL(request.url).pathname),
      },
    },
    parent,
  )
  try {
    const response = await context.with(trace.setSpan(parent, span), handle)
    const route = routeOf()
    if (route) {
      span.updateName(`${method} ${route}`)
      span.setAttribute('http.route', route)
    }
    span.setAttribute('http.response.status_code', response.status)
    if (response.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
    instruments.httpDuration.record((performance.now() - started) / 1000, {
      'http.request.method': method,
      'http.route': route ?? 'unmatched',
      'http.response.status_code': response.status,
    })
    return response
  } catch (error) {
    failSpan(span, error)
    throw error
  } finally {
    span.end()
  }
}

async function traceAdmission<T>(
  state: ActiveState,
  attributes: Attributes,
  run: () => Promise<T>,
  describe: (result: T) => Attributes,
): Promise<T> {
  return state.tracer.startActiveSpan('batch.admit', { attributes }, async (span) => {
    try {
      const result = await run()
      const described = describe(result)
      span.setAttributes(described)
      const batchId = described['batch.id']
      // A retried submit (same Idempotency-Key) keeps the link to the admission that made it.
      if (typeof batchId === 'string' && !state.admitted.has(batchId))
        remember(state, batchId, span.spanContext())
      return result
    } catch (error) {
      // A refusal thrown (an Idempotency-Key sent with another request) is the caller's, as
      // the refusals returned are: named as the result, the span not failed.
      if (error instanceof GatewayError) span.setAttribute('batch.result', error.code)
      else failSpan(span, error)
      throw error
    } finally {
      span.end()
    }
  })
}

async function traceUpstream<T>(
  state: ActiveState,
  call: UpstreamCall,
  run: () => Promise<T>,
  describe: (result: T) => UpstreamResult | Promise<UpstreamResult>,
): Promise<T> {
  const span = startUpstreamSpan(state, call)
  let value
  try {
    value = await run()
  } catch (error) {
    failSpan(span, error)
    span.end()
    throw error
  }
  const finish = (result: UpstreamResult) => finishUpstream(state.instruments, span, call, result)
  // A stream is described once it ended (its usage comes last); the caller has it at once.
  const described = describe(value)
  if (described instanceof Promise) described.then(finish, () => span.end())
  else finish(described)
  return value
}

/** A client span; a batch line's is a root span linked to its batch's admission when known. */
function startUpstreamSpan({ tracer, admitted }: ActiveState, call: UpstreamCall): Span {
  const attributes: Attributes = {
    'gen_ai.operation.name': call.endpoint,
    'gen_ai.provider.name': call.provider,
    'gen_ai.request.model': call.model,
  }
  const batchLink = call.batchId ? admitted.get(call.batchId) : undefined
  if (call.batchId) {
    attributes['batch.id'] = call.batchId
    attributes['batch.line'] = call.lineNo
  }
  attributes['line.attempt'] = call.attempt ?? 1
  // A batch's calls happen long after its request ended: they start their own trace.
  const parent = call.batchId ? ROOT_CONTEXT : context.active()
  return tracer.startSpan(
    `${call.endpoint} ${call.model}`,
    {
      kind: SpanKind.CLIENT,
      attributes,
      links: batchLink ? [{ context: batchLink, attributes: { 'link.kind': 'batch.admit' } }] : [],
    },
    parent,
  )
}

/** Ends an upstream call's span with what it came to, and records its metrics. */
function finishUpstream(
  instruments: Instruments,
  span: Span,
  call: UpstreamCall,
  result: UpstreamResult,
) {
  const labels = {
    'gen_ai.provider.name': call.provider,
    'gen_ai.operation.name': call.endpoint,
  }
  if (result.status !== null) span.setAttribute('http.response.status_code', result.status)
  if (result.usage) {
    span.setAttribute('gen_ai.usage.input_tokens', result.usage.input_tokens)
    span.setAttribute('gen_ai.usage.output_tokens', result.usage.output_tokens)
    instruments.upstreamTokens.add(result.usage.input_tokens, { ...labels, 'token.type': 'input' })
    instruments.upstreamTokens.add(result.usage.output_tokens, {
      ...labels,
      'token.type': 'output',
    })
  }
  if (result.errorKind) {
    span.setAttribute('error.type', result.errorKind)
    span.setStatus({ code: SpanStatusCode.ERROR })
    instruments.upstreamErrors.add(1, { ...labels, 'error.type': result.errorKind })
  }
  instruments.upstreamDuration.record(result.latencyMs / 1000, {
    ...labels,
    outcome: result.errorKind ?? 'ok',
  })
  span.end()
}

/** The gauges read at each export: queue depth and lines in flight. */
function observeGauges(
  meter: Meter,
  {
    pendingLines,
    linesInFlight,
  }: { pendingLines: () => Promise<number>; linesInFlight: () => number },
) {
  meter
    .createObservableGauge('multigrid.queue.pending_lines', {
      description: 'Lines waiting to be dispatched (queue depth)',
      unit: '{line}',
    })
    .addCallback(async (result) => {
      try {
        result.observe(await pendingLines())
      } catch {
        // The store is unreachable: no value rather than a wrong one; /readyz says why.
      }
    })
  meter
    .createObservableGauge('multigrid.lines.in_flight', {
      description: 'Lines being sent upstream by this instance',
      unit: '{line}',
    })
    .addCallback((result) => result.observe(linesInFlight()))
}

function createInstruments(meter: Meter): Instruments {
  const seconds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]
  return {
    linesCompleted: meter.createCounter('multigrid.lines.completed', {
      description: 'Lines finished (succeeded or failed)',
      unit: '{line}',
    }),
    upstreamDuration: meter.createHistogram('multigrid.upstream.duration', {
      description: 'Duration of upstream calls',
      unit: 's',
      advice: { explicitBucketBoundaries: seconds },
    }),
    upstreamErrors: meter.createCounter('multigrid.upstream.errors', {
      description: 'Failed upstream calls',
      unit: '{call}',
    }),
    upstreamTokens: meter.createCounter('multigrid.upstream.tokens', {
      description: 'Tokens reported by upstreams',
      unit: '{token}',
    }),
    rateLimitRejections: meter.createCounter('multigrid.rate_limit.rejections', {
      description: 'Requests refused by a limit',
      unit: '{request}',
    }),
    httpDuration: meter.createHistogram('http.server.request.duration', {
      description: 'Duration of HTTP requests',
      unit: 's',
      advice: { explicitBucketBoundaries: seconds },
    }),
  }
}

const HEADER_GETTER = {
  get: (headers: Headers, key: string) => headers.get(key) ?? undefined,
  keys: (headers: Headers) => {
    const keys: string[] = []
    headers.forEach((_value, key) => keys.push(key))
    return keys
  },
}

/** The SDK's diagnostics: only its warnings and errors (a failed export), as our log events. */
function diagToLogger(logger: Logger) {
  const ignore = () => {}
  return {
    error: (message: string) => logger.warn('telemetry.sdk_error', { message }),
    warn: (message: string) => logger.warn('telemetry.sdk_warning', { message }),
    info: ignore,
    debug: ignore,
    verbose: ignore,
  }
}

/** Telemetry switched off: every helper runs its function and nothing else. */
export const noTelemetry: Telemetry = {
  enabled: false,
  tracer: NOOP_TRACER,
  meter: NOOP_METER,
  instruments: createInstruments(NOOP_METER),
  request: (_request, handle) => handle(),
  admission: (_attributes, run) => run(),
  upstream: (_call, run) => run(),
  lineFinished() {},
  rateLimited() {},
  observe() {},
  shutdown: async () => {},
}
