/** The operator CLI works on the store directly: make an account and a key that the API accepts. */
import { expect, test } from 'bun:test'
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  chatLine,
  jsonl,
  startTestGateway,
  type TestGateway,
  type TestGatewayOptions,
} from '../helpers/gateway.ts'
import { LORA_BASE, loraCatalog } from '../helpers/lora-catalog.ts'
import { waitFor } from '../helpers/wait.ts'

const root = join(import.meta.dir, '../..')

async function mg(env: Record<string, string>, ...args: string[]) {
  const child = Bun.spawn([process.execPath, 'src/cli/admin.ts', ...args], {
    cwd: root,
    env: { ...env, PATH: process.env.PATH ?? '' },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [code, out, err] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ])
  return { code, out, err, json: code === 0 && /^[[{]/.test(out) ? JSON.parse(out) : null }
}

/**
 * Runs `body` with a gateway that serves the API without dispatching, on a store of its own, and
 * the environment that points the CLI at the same store (the SQLite file the gateway uses).
 */
async function withCliGateway(
  options: TestGatewayOptions,
  body: (env: Record<string, string>, gw: TestGateway) => Promise<void>,
) {
  const gw = await startTestGateway({
    ...options,
    env: { MULTIGRID_DISPATCH: '0', MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-cli-')) },
  })
  try {
    await body(
      {
        MULTIGRID_DATA_DIR: gw.env.MULTIGRID_DATA_DIR,
        MULTIGRID_CONFIG: gw.env.MULTIGRID_CONFIG,
      },
      gw,
    )
  } finally {
    await gw.stop()
  }
}

test('accounts create, keys create, credit, show, revoke', async () => {
  // The CLI opens the same SQLite file the running gateway uses.
  await withCliGateway({}, async (env, gw) => {
    const account = await mg(env, 'accounts', 'create', 'acme', '--credit', '100')
    expect(account.code).toBe(0)
    expect(account.json).toMatchObject({ name: 'acme', balance_usd: '100.000000' })
    const key = await mg(
      env,
      'keys',
      'create',
      account.json.id,
      '--name',
      'ci',
      '--scopes',
      'batches,read',
    )
    expect(key.json).toMatchObject({ account_id: account.json.id, scopes: ['batches', 'read'] })
    expect(key.json.key).toMatch(/^mg_/)
    const submitted = await gw.request('/v1/batches', key.json.key, {
      method: 'POST',
      body: jsonl([chatLine('a')]),
    })
    expect(submitted.status).toBe(201)
    expect((await mg(env, 'accounts', 'credit', account.json.id, '5.5')).json).toMatchObject({
      balance_usd: '105.500000',
    })
    expect((await mg(env, 'accounts', 'show', account.json.id)).json).toMatchObject({
      open_batches: 1,
      held_usd: '0.000093',
    })
    // An operator who lost the ids finds them again: the accounts, then an account's keys.
    const other = await mg(env, 'accounts', 'create', 'globex')
    const listed = await mg(env, 'accounts', 'list')
    expect(listed.json.map((a: { id: string }) => a.id)).toEqual([other.json.id, account.json.id])
    const keys = await mg(env, 'keys', 'list', account.json.id)
    expect(keys.json).toEqual([expect.objectContaining({ id: key.json.id, name: 'ci' })])
    expect(keys.out).not.toContain(key.json.key)
    expect((await mg(env, 'keys', 'list', 'acct_missing')).code).toBe(2)
    expect((await mg(env, 'keys', 'revoke', key.json.id)).json.revoked_at).toBeNumber()
    // Revoked by another process: the gateway's key cache honours it within 2 s (SPEC: every instance).
    await waitFor(
      'the revoked key refused',
      async () => (await gw.request('/v1/batches', key.json.key)).status === 401,
      2_000,
      50,
    )
    const bad = await mg(env, 'keys', 'create', account.json.id, '--scopes', 'root')
    expect(bad.code).toBe(2)
    expect(bad.err).toContain('unknown scope root')
    // Numbers are plain decimal digits, as on the API: "0x10" is not 16.
    for (const text of ['0x10', '1e2', ' 5', '5.0']) {
      const odd = await mg(env, 'keys', 'create', account.json.id, '--rate-limit', text)
      expect([text, odd.code]).toEqual([text, 2])
      expect(odd.err).toContain('in decimal digits')
    }
  })
})

test('accounts create/set take file quotas; credit amounts are bounded and exact', async () => {
  await withCliGateway({}, async (env, gw) => {
    // A new account starts at zero or above, as on the admin API: no negative balance.
    const negative = await mg(env, 'accounts', 'create', 'neg', '--credit=-5')
    expect(negative.code).toBe(2)
    expect(negative.err).toContain('--credit must not be negative')
    expect((await mg(env, 'accounts', 'list')).json).toEqual([])
    const account = await mg(
      env,
      'accounts',
      'create',
      'acme',
      '--credit',
      '1000000000000',
      '--max-files',
      '3',
    )
    expect(account.json).toMatchObject({
      max_files: 3,
      max_stored_bytes: 20_000_000_000,
      files_in_use: 0,
      stored_bytes: 0,
    })
    const set = await mg(
      env,
      'accounts',
      'set',
      account.json.id,
      '--max-files',
      'default',
      '--max-stored-bytes',
      '1000',
    )
    expect(set.json).toMatchObject({ max_files: 500, max_stored_bytes: 1000 })
    expect(await (await gw.admin(`/accounts/${account.json.id}`)).json()).toMatchObject({
      max_files: 500,
      max_stored_bytes: 1000,
    })
    expect((await mg(env, 'accounts', 'set', account.json.id, '--max-files', '1.5')).code).toBe(2)

    const huge = await mg(env, 'accounts', 'credit', account.json.id, '1' + '0'.repeat(400))
    expect(huge.code).toBe(2)
    expect(huge.err).toContain('at most 1000000000000')
    expect((await mg(env, 'accounts', 'credit', account.json.id, '--', '-100')).json).toMatchObject(
      { balance_usd: '999999999900.000000' },
    )
    // Removing more than the balance is refused with the most that can be, not cut silently.
    const over = await mg(env, 'accounts', 'credit', account.json.id, '--', '-999999999999')
    expect(over.code).not.toBe(0)
    expect(over.err).toContain(
      'would take the balance below zero: it is 999999999900.000000 USD; remove at most 999999999900.000000',
    )
    const viaApi = await gw.admin(`/accounts/${account.json.id}/credits`, {
      body: { amount_usd: '-999999999999' },
    })
    expect(viaApi.status).toBe(400)
    expect(((await viaApi.json()) as { error: { param: string } }).error.param).toBe('amount_usd')
    expect(await (await gw.admin(`/accounts/${account.json.id}`)).json()).toMatchObject({
      balance_usd: '999999999900.000000',
    })
  })
})

test('adapters register, list, deactivate (fine-tunes): the ids the gateway accepts in lines', async () => {
  await withCliGateway({ catalog: loraCatalog('http://127.0.0.1:9/v1') }, async (env, gw) => {
    const { accountId, key } = await gw.newAccount('1')
    const flags = ['--rank', '32', '--size-mib', '160', '--source', '/srv/lora/support-v3']
    const made = await mg(env, 'adapters', 'register', accountId, LORA_BASE, 'support-v3', ...flags)
    expect(made.code).toBe(0)
    expect(made.json).toMatchObject({ object: 'model', parent: LORA_BASE, status: 'active' })
    expect(made.json.id).toStartWith('ft:lora-base:')
    const refused = await mg(env, 'adapters', 'register', accountId, 'sim/chat', 'x', ...flags)
    expect(refused.code).toBe(2)
    expect(refused.err).toContain('base_model')
    const dry = () =>
      gw.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        body: jsonl([chatLine('a', 'hi', {}, made.json.id)]),
      })
    expect((await dry()).status).toBe(200)
    expect((await mg(env, 'adapters', 'list', accountId)).json.map((a: any) => a.id)).toEqual([
      made.json.id,
    ])
    const gone = await mg(env, 'adapters', 'deactivate', made.json.id)
    expect(gone.json.status).toBe('inactive')
    // Deactivated outside this gateway: it notices within its cache time (5 s).
    await waitFor('the deactivation', async () => (await dry()).status === 400, 10_000, 200)
  })
})

test('accounts create/set take the daily spend limit, and a CLI deposit starts a batch waiting for credit', async () => {
  await withCliGateway({}, async (env, gw) => {
    const account = await mg(env, 'accounts', 'create', 'acme', '--daily-limit', '2.50')
    expect(account.json).toMatchObject({
      daily_spend_limit_usd: '2.5',
      daily_spend_used_usd: '0.000000',
    })
    const id = account.json.id
    expect((await mg(env, 'accounts', 'set', id, '--daily-limit', 'none')).json).toMatchObject({
      daily_spend_limit_usd: null,
    })
    expect((await mg(env, 'accounts', 'set', id, '--daily-limit', '7')).json).toMatchObject({
      daily_spend_limit_usd: '7',
    })
    expect(
      (await mg(env, 'accounts', 'set', id, '--max-open-batches', '3', '--rate-limit', '30')).json,
    ).toMatchObject({ max_open_batches: 3, rate_limit_per_minute: 30, daily_spend_limit_usd: '7' })
    for (const bad of ['-1', 'lots']) {
      const refused = await mg(env, 'accounts', 'set', id, `--daily-limit=${bad}`)
      expect(refused.code).toBe(2)
      expect(refused.err).toContain('--daily-limit')
    }
    const key = (await mg(env, 'keys', 'create', id)).json.key
    const submitted = await gw.request('/v1/batches?wait_for_credit=true', key, {
      method: 'POST',
      body: jsonl([chatLine('a')]),
    })
    const batch = (await submitted.json()) as { id: string; status: string }
    expect(batch.status).toBe('validating')
    await mg(env, 'accounts', 'credit', id, '1')
    // The embedded store has one process: the gateway's own poll finds the deposit.
    await waitFor(
      'the batch to start',
      async () =>
        ((await (await gw.request(`/v1/batches/${batch.id}`, key)).json()) as { status: string })
          .status === 'in_progress',
      5_000,
    )
  })
})

test('--help prints the usage and exits 0; an unknown command or flag prints it and exits 2, without a stack trace', async () => {
  // No store is opened for either: a data dir that does not exist stays so.
  const env = { MULTIGRID_DATA_DIR: join(mkdtempSync(join(tmpdir(), 'mg-help-')), 'none') }
  for (const args of [['--help'], ['-h'], ['help']]) {
    const { code, out, err } = await mg(env, ...args)
    expect(code).toBe(0)
    expect(out).toContain('usage: npm run mg -- <command>')
    expect(out).toContain('accounts create <name>')
    expect(err).toBe('')
  }
  for (const args of [['frobnicate'], ['accounts', 'explode'], [], ['--bogus']]) {
    const { code, err } = await mg(env, ...args)
    expect(code).toBe(2)
    expect(err).toContain('usage: npm run mg -- <command>')
    expect(err).not.toMatch(/\n\s+at /)
  }
  expect((await mg(env, 'frobnicate')).err).toContain('unknown command "frobnicate"')
  expect((await mg(env, '--bogus')).err).toStartWith('mg: unknown option --bogus\n')
  // A misspelt flag is named with the one meant, not with Node's advice on positional arguments.
  const misspelt = await mg(env, 'accounts', 'create', 'acme', '--credt', '5')
  expect(misspelt.code).toBe(2)
  expect(misspelt.err).toStartWith('mg: unknown option --credt; did you mean --credit?')
  expect(existsSync(env.MULTIGRID_DATA_DIR)).toBe(false)
})

test('a command without its arguments, or a group without its command, says what is missing', async () => {
  const env = { MULTIGRID_DATA_DIR: join(mkdtempSync(join(tmpdir(), 'mg-args-')), 'none') }
  const said = async (...args: string[]) => {
    const { code, err } = await mg(env, ...args)
    expect([args.join(' '), code]).toEqual([args.join(' '), 2])
    return err.split('\n')[0]
  }
  expect(await said('accounts', 'create')).toBe('mg: accounts create needs <name>; missing <name>')
  expect(await said('accounts', 'credit', 'acct_1')).toBe(
    'mg: accounts credit needs <account-id> <amount-usd>; missing <amount-usd>',
  )
  expect(await said('keys', 'revoke')).toBe('mg: keys revoke needs <key-id>; missing <key-id>')
  expect(await said('accounts')).toBe(
    'mg: "accounts" needs a command: create, list, show, set, credit',
  )
  // A negative amount reads as flags unless it comes after --: the message says so.
  expect((await mg(env, 'accounts', 'credit', 'acct_1', '-100')).err).toContain(
    'a negative amount goes after --: npm run mg -- accounts credit <account-id> -- -100',
  )
  expect(existsSync(env.MULTIGRID_DATA_DIR)).toBe(false)
})
