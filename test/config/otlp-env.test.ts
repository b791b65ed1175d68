/**
 * The standard OpenTelemetry variables (docs/operations.md): a base endpoint and per-signal ones, the
 * protocol per signal, the metric export interval; a wrong value is a configuration error naming
 * the variable. And a configuration error never shows a secret's value.
 */
import { expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { otlpFromEnv } from '../../src/telemetry/otlp-env.ts'

test('a base endpoint puts each signal under its path, as JSON, metrics every 60 s', () => {
  expect(otlpFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/' })).toEqual({
    traces: { url: 'http://127.0.0.1:4318/v1/traces', protocol: 'http/json' },
    metrics: { url: 'http://127.0.0.1:4318/v1/metrics', protocol: 'http/json' },
    metricIntervalMs: 60_000,
  })
  expect(otlpFromEnv({})).toBeNull()
  expect(
    otlpFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_SDK_DISABLED: 'true',
    }),
  ).toBeNull()
})

test('per-signal endpoints are used as they are, each with its own protocol; the interval is read', () => {
  expect(
    otlpFromEnv({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/custom/traces',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_METRIC_EXPORT_INTERVAL: '5000',
    }),
  ).toEqual({
    traces: { url: 'http://127.0.0.1:4318/custom/traces', protocol: 'http/json' },
    metrics: null,
    metricIntervalMs: 5_000,
  })
  expect(
    otlpFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://127.0.0.1:9000/m',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    }),
  ).toMatchObject({
    traces: { url: 'http://127.0.0.1:4318/v1/traces', protocol: 'http/protobuf' },
    metrics: { url: 'http://127.0.0.1:9000/m', protocol: 'http/protobuf' },
  })
})

test('a protocol or interval it cannot use is an error naming the variable', () => {
  const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }
  expect(otlpFromEnv({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toContain(
    'OTEL_EXPORTER_OTLP_PROTOCOL must be http/json or http/protobuf',
  )
  expect(otlpFromEnv({ ...base, OTEL_METRIC_EXPORT_INTERVAL: 'soon' })).toContain(
    'OTEL_METRIC_EXPORT_INTERVAL',
  )
  expect(() => loadConfig({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(ConfigError)
})

test('an endpoint without http:// or https:// is refused at start-up, naming the variable that was set', () => {
  // "localhost:4318" parses as a URL (scheme "localhost:"), and every export then failed.
  expect(otlpFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost:4318' })).toBe(
    'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, such as http://localhost:4318: it is "localhost:4318"',
  )
  expect(otlpFromEnv({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'ftp://collector/x' })).toContain(
    'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT must be an http:// or https:// URL',
  )
  // Credentials in a bad value are not repeated.
  const withPassword = otlpFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'user:SECRET@collector' })
  expect(withPassword).toContain('OTEL_EXPORTER_OTLP_ENDPOINT')
  expect(withPassword).not.toContain('SECRET')
  expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost:4318' })).toThrow(ConfigError)
})

test("a configuration error names a secret but never shows its value; a URL's password is masked", () => {
  const message = (env: Record<string, string>) => {
    try {
      loadConfig(env)
    } catch (error) {
      return (error as Error).message
    }
    throw new Error('no configuration error')
  }
  const token = message({ MULTIGRID_ADMIN_TOKEN: 'shortADMSECRET' })
  expect(token).toContain('MULTIGRID_ADMIN_TOKEN')
  expect(token).not.toContain('shortADMSECRET')
  const url = message({ DATABASE_URL: 'mysql://u:DBPASSWORDSECRET@h/db' })
  expect(url).toContain('DATABASE_URL')
  expect(url).not.toContain('DBPASSWORDSECRET')
})
