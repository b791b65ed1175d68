/**
 * A MULTIGRID_ variable the gateway does not know is not ignored in silence: a misspelt setting
 * (a retention period, the metrics token) would leave its default in force unseen.
 */
import { expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config.ts'

test('a misspelt MULTIGRID_ variable stops start-up naming the one it most likely means', () => {
  const cases = {
    MULTIGRID_RESULT_RETENTON_DAYS: 'MULTIGRID_RESULT_RETENTION_DAYS',
    MULTIGRID_METRICS_TOKN: 'MULTIGRID_METRICS_TOKEN',
    MULTIGRID_DRAIN_MSS: 'MULTIGRID_DRAIN_MS',
  }
  for (const [typo, meant] of Object.entries(cases)) {
    const load = () => loadConfig({ [typo]: 'x'.repeat(20) })
    expect(load).toThrow(ConfigError)
    expect(load).toThrow(`unknown variable ${typo}`)
    expect(load).toThrow(`did you mean ${meant}?`)
  }
})

test('other unknown MULTIGRID_ variables are listed for a start-up warning; the clients’ own are not', () => {
  const config = loadConfig({
    MULTIGRID_SOMETHING_ELSE: '1',
    MULTIGRID_URL: 'http://127.0.0.1:8080',
    MULTIGRID_API_KEY: 'mg_x',
    MULTIGRID_WEBHOOK_SECRET: 'whsec_x',
    MULTIGRID_DRAIN_MS: '5000',
  })
  expect(config.unknownVariables).toEqual(['MULTIGRID_SOMETHING_ELSE'])
  expect(loadConfig({}).unknownVariables).toEqual([])
})
