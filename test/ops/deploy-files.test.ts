/**
 * What a newcomer reads before running anything: package.json's engines, the compose file's
 * services (each its own health check, the gateway's flags as `npm start` has them, pinned
 * images), and the dashboard's word on what its cookie holds. No Docker engine runs here, so the
 * compose file and the Dockerfile are checked as files.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { signInPage } from '../../src/http/dashboard/pages.ts'

const ROOT = join(import.meta.dir, '../..')
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8')

interface Service {
  image?: string
  command?: string | string[]
  healthcheck?: { test: string[] }
}

describe('deploy files', () => {
  test('package.json names the Node and Bun versions it needs', () => {
    const pkg = JSON.parse(read('package.json'))
    expect(pkg.engines.node).toBe('>=20')
    expect(pkg.engines.bun).toBe(`>=${pkg.devDependencies.bun.replace(/^\^/, '')}`)
  })

  test('compose: the simulator has its own health check, the gateways keep the head limit, images pinned', () => {
    const compose = Bun.YAML.parse(read('compose.yaml')) as {
      services: Record<string, Service>
      'x-gateway': Service & { depends_on: Record<string, { condition: string }> }
    }
    const { simulator } = compose.services
    const check = simulator.healthcheck!.test.join(' ')
    expect(check).toContain('127.0.0.1:8090')
    expect(check).not.toContain('8080')
    expect(compose['x-gateway'].depends_on.simulator.condition).toBe('service_healthy')
    for (const name of ['gateway-1', 'gateway-2']) {
      expect(String(compose.services[name].command)).toContain(
        'bun --max-http-header-size=65536 src/main.ts',
      )
    }
    // An exact release (digits and dots), not a floating major.
    for (const name of ['postgres', 'redis'])
      expect(compose.services[name].image).toMatch(/^[a-z]+:\d+\.\d+(\.\d+)?-alpine/)
    const bases = [...read('Dockerfile').matchAll(/^FROM (\S+)/gm)].map((m) => m[1])
    expect(bases.length).toBe(2)
    for (const base of bases) expect(base).toMatch(/:\d+\.\d+(\.\d+)?-/)
  })

  test('the sign-in page says the cookie holds a session id, not the key', () => {
    const page = String(signInPage())
    expect(page).toContain('random session id')
    expect(page).not.toContain('kept in a cookie')
  })
})
