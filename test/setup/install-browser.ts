/**
 * Preloaded by `bun test` (bunfig.toml): the dashboard's browser test drives Debian's Chromium,
 * which playwright-core does not bring. On a machine without it, install it once when this user
 * may (root with apt-get, as on a fresh Debian box or in CI); otherwise say in one line what to run,
 * and the browser test fails with the same advice while every other test runs.
 */
import { existsSync } from 'node:fs'

const CHROMIUM = '/usr/bin/chromium'
const ADVICE =
  'the dashboard test needs Chromium: run "sudo apt-get install -y chromium", then npm test again'

function run(command: string[]): boolean {
  const result = Bun.spawnSync(command, {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  return result.exitCode === 0
}

if (!existsSync(CHROMIUM) && process.platform === 'linux') {
  const mayInstall = process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')
  if (!mayInstall) console.error(`multigrid tests: ${ADVICE}`)
  else {
    console.error(
      "multigrid tests: installing Debian's chromium for the dashboard test (once; a minute or two)",
    )
    // The package lists may be missing or stale on a fresh machine: refresh them only if needed.
    const installed =
      run(['apt-get', 'install', '-y', '-qq', 'chromium']) ||
      (run(['apt-get', 'update', '-qq']) && run(['apt-get', 'install', '-y', '-qq', 'chromium']))
    if (!installed) console.error(`multigrid tests: installing chromium failed; ${ADVICE}`)
  }
}
