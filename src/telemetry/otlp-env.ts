/**
 * Where and how telemetry is exported, from the standard OpenTelemetry variables
 * (docs/operations.md): `OTEL_EXPORTER_OTLP_ENDPOINT` (each signal under its path, /v1/traces and
 * /v1/metrics), or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `_METRICS_ENDPOINT` (used as they are);
 * `OTEL_EXPORTER_OTLP_PROTOCOL` (or the per-signal `_TRACES_PROTOCOL` / `_METRICS_PROTOCOL`):
 * `http/json`, the default here since every collector takes it on :4318, or `http/protobuf`;
 * `OTEL_METRIC_EXPORT_INTERVAL` (ms, 60000 by default). Headers, the service name and resource
 * attributes the SDK reads itself. Read from the environment the gateway was given, so that a
 * test's is honoured as the process's is.
 */

export type OtlpProtocol = 'http/json' | 'http/protobuf'

export interface OtlpExport {
  url: string
  protocol: OtlpProtocol
}

export interface OtlpConfig {
  traces: OtlpExport | null
  metrics: OtlpExport | null
  metricIntervalMs: number
}

const PROTOCOLS: readonly string[] = ['http/json', 'http/protobuf']

/** The export, or null when no endpoint is set; a string is what is wrong with the variables. */
export function otlpFromEnv(env: Record<string, string | undefined>): OtlpConfig | null | string {
  const set = (name: string) => (env[name]?.trim() ? env[name]!.trim() : undefined)
  if (set('OTEL_SDK_DISABLED') === 'true') return null
  const base = set('OTEL_EXPORTER_OTLP_ENDPOINT')?.replace(/\/+$/, '')
  const signal = (name: 'TRACES' | 'METRICS', path: string): OtlpExport | null | string => {
    const own = set(`OTEL_EXPORTER_OTLP_${name}_ENDPOINT`)
    const url = own ?? (base && `${base}/${path}`)
    if (!url) return null
    // "localhost:4318" parses as a URL of scheme "localhost:": only http(s) is exported to.
    if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) {
      const variable = own ? `OTEL_EXPORTER_OTLP_${name}_ENDPOINT` : 'OTEL_EXPORTER_OTLP_ENDPOINT'
      const given = own ?? base!
      const shown = given.includes('@') ? '(its value not shown)' : JSON.stringify(given)
      return `${variable} must be an http:// or https:// URL, such as http://localhost:4318: it is ${shown}`
    }
    const variable = set(`OTEL_EXPORTER_OTLP_${name}_PROTOCOL`)
      ? `OTEL_EXPORTER_OTLP_${name}_PROTOCOL`
      : 'OTEL_EXPORTER_OTLP_PROTOCOL'
    const protocol = set(variable) ?? 'http/json'
    if (!PROTOCOLS.includes(protocol))
      return `${variable} must be http/json or http/protobuf (grpc is not supported): it is ${JSON.stringify(protocol)}`
    return { url, protocol: protocol as OtlpProtocol }
  }
  const traces = signal('TRACES', 'v1/traces')
  if (typeof traces === 'string') return traces
  const metrics = signal('METRICS', 'v1/metrics')
  if (typeof metrics === 'string') return metrics
  if (!traces && !metrics) return null
  const interval = set('OTEL_METRIC_EXPORT_INTERVAL')
  const metricIntervalMs = interval === undefined ? 60_000 : Number(interval)
  if (!Number.isInteger(metricIntervalMs) || metricIntervalMs < 100)
    return `OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds, at least 100: it is ${JSON.stringify(interval)}`
  return { traces, metrics, metricIntervalMs }
}
