/**
 * The operator CLI (`bun run mg …`): the admin API's operations straight on the configured store,
 * so a fresh install can make its first account and key without the admin API.
 */
import { parseArgs } from 'node:util'
import { optionProblem } from './option-problem.ts'
import { createAccounts } from '../accounts/accounts.ts'
import { createFineTunes } from '../accounts/fine-tunes.ts'
import { createCatalog } from '../catalog/catalog.ts'
import { ConfigError, loadConfig } from '../config.ts'
import { ALL_SCOPES, type Scope } from '../domain.ts'
import { creditAmountProblem, creditRemovalProblem } from '../money/credit-amount.ts'
import { renderAccount, renderFineTune, renderKey } from '../http/render-admin.ts'
import { parseWholeNumber } from '../schemas/whole-number.ts'
import { KEY_REVOCATIONS_CHANNEL } from '../coordination/key-revocations.ts'
import { NUDGE_CHANNEL } from '../coordination/nudges.ts'
import { openStore, openStoreChannel } from '../store/open-store.ts'
import { databaseProblem, dataDirProblem } from './start-up-notes.ts'

const USAGE = `usage: npm run mg -- <command>   (the store of MULTIGRID_DATA_DIR, or DATABASE_URL)
  accounts create <name> [--credit USD] [--max-open-batches N] [--rate-limit N]
                  [--max-files N] [--max-stored-bytes N] [--daily-limit USD]
  accounts list
  accounts show <account-id>
  accounts set <account-id> [--max-open-batches N] [--rate-limit N]
                  [--max-files N|default] [--max-stored-bytes N|default] [--daily-limit USD|none]
  accounts credit <account-id> <amount-usd>
  keys create <account-id> [--name NAME] [--scopes batches,inference,read] [--rate-limit N]
  keys list <account-id>
  keys revoke <key-id>
  adapters register <account-id> <base-model> <name> --rank N --size-mib N --source PATH
  adapters list <account-id>
  adapters deactivate <fine-tune-id>
  help`

/**
 * The commands USAGE lists, as "group command", with the arguments each needs: anything else is
 * refused before the store opens, in words that say what is missing.
 */
const COMMANDS = new Map<string, string[]>([
  ['accounts create', ['<name>']],
  ['accounts list', []],
  ['accounts show', ['<account-id>']],
  ['accounts set', ['<account-id>']],
  ['accounts credit', ['<account-id>', '<amount-usd>']],
  ['keys create', ['<account-id>']],
  ['keys list', ['<account-id>']],
  ['keys revoke', ['<key-id>']],
  ['adapters register', ['<account-id>', '<base-model>', '<name>']],
  ['adapters list', ['<account-id>']],
  ['adapters deactivate', ['<fine-tune-id>']],
])

/** Why `positionals` are not a command USAGE lists, or null when they are. */
function commandProblem(positionals: string[]): string | null {
  const asked = positionals.slice(0, 2).join(' ')
  const needs = COMMANDS.get(asked)
  if (needs) {
    const missing = needs.slice(positionals.length - 2)
    return missing.length === 0
      ? null
      : `mg: ${asked} needs ${needs.join(' ')}; missing ${missing.join(' ')}`
  }
  if (!asked) return 'mg: no command given'
  const commands = [...COMMANDS.keys()].filter((c) => c.startsWith(`${positionals[0]} `))
  if (positionals.length === 1 && commands.length > 0)
    return `mg: "${asked}" needs a command: ${commands.map((c) => c.split(' ')[1]).join(', ')}`
  return `mg: unknown command "${asked}"`
}

function readArgs() {
  try {
    return parseArgs({ allowPositionals: true, options: OPTIONS })
  } catch (error) {
    // An unknown or malformed flag: say which, with the usage, and no stack trace. A negative
    // amount reads as short flags ("-100": -1, -0, -0) unless it comes after --.
    const message = optionProblem(error, OPTIONS)
    const negative = process.argv.slice(2).some((arg) => /^-\d/.test(arg))
      ? '\na negative amount goes after --: npm run mg -- accounts credit <account-id> -- -100'
      : ''
    fail(`mg: ${message}${negative}\n\n${USAGE}`)
  }
}

const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  credit: { type: 'string' },
  'max-open-batches': { type: 'string' },
  'rate-limit': { type: 'string' },
  'max-files': { type: 'string' },
  'max-stored-bytes': { type: 'string' },
  'daily-limit': { type: 'string' },
  name: { type: 'string' },
  scopes: { type: 'string' },
  rank: { type: 'string' },
  'size-mib': { type: 'string' },
  source: { type: 'string' },
} as const

function fail(message: string): never {
  console.error(message)
  process.exit(2)
}

const int = (text: string | undefined, flag: string) => {
  if (text === undefined) return undefined
  // Plain digits only, as on the API: Number() would read "0x10" as 16 and "1e2" as 100.
  return (
    parseWholeNumber(text, 1, 2_147_483_647) ??
    fail(`--${flag} must be a whole number from 1 to 2147483647 in decimal digits`)
  )
}
/** A file limit: a whole number ≥ 0, or `default` (null) to use the configured default. */
const limit = (text: string | undefined, flag: string): number | null | undefined => {
  if (text === undefined) return undefined
  if (text === 'default') return null
  const n = Number(text)
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n))
    fail(`--${flag} must be a whole number (0 or more) or "default"`)
  return n
}
/** A credit amount (src/money/credit-amount.ts); `signed`: it may be negative (credit taken back). */
const decimal = (text: string | undefined, what: string, signed = true) => {
  if (text === undefined) return undefined
  const problem = creditAmountProblem(text, signed)
  if (problem) fail(`${what} ${problem}`)
  return text
}

/** The daily spend limit (docs/money-and-limits.md): a decimal amount ≥ 0, or `none` (null) for no limit. */
const dailyLimit = (text: string | undefined): string | null | undefined => {
  if (text === undefined) return undefined
  if (text === 'none') return null
  return decimal(text, '--daily-limit', false)
}

const { values, positionals } = readArgs()
if (values.help || positionals[0] === 'help') {
  console.log(USAGE)
  process.exit(0)
}
const problem = commandProblem(positionals)
if (problem) fail(`${problem}\n\n${USAGE}`)

let config
try {
  config = loadConfig()
} catch (error) {
  if (error instanceof ConfigError) fail(`configuration error: ${error.message}`)
  throw error
}
const { store } = await openStore(config).catch((error: unknown) => {
  const problem = dataDirProblem(error, config) ?? databaseProblem(error, config)
  if (problem) fail(`configuration error: ${problem}`)
  throw error
})
const accounts = createAccounts(store, {
  maxOpenBatches: config.limits.defaultMaxOpenBatches,
  rateLimitPerMinute: config.limits.defaultRateLimitPerMinute,
  maxFiles: config.limits.defaultMaxFiles,
  maxStoredBytes: config.limits.defaultMaxStoredBytes,
})
const fineTunes = createFineTunes(store, createCatalog(config.catalog, config.providerKeys))
const [group, command, first, second, third] = positionals

/**
 * A message on the store's channel (PostgreSQL) to the running instances: a nudge (look for
 * work now), or a key revoked (forget it now).
 */
async function tellInstances(name: string, payload: string) {
  const channel = await openStoreChannel(config!, name)
  if (!channel) return
  try {
    await channel.send(payload)
  } finally {
    await channel.close()
  }
}
const print = (value: unknown) => console.log(JSON.stringify(value, null, 2))

try {
  if (group === 'accounts' && command === 'create' && first) {
    print(
      renderAccount(
        await accounts.createAccount({
          name: first,
          // A new account starts at zero or above, as on the admin API.
          creditUsd: decimal(values.credit, '--credit', false) ?? '0',
          maxOpenBatches: int(values['max-open-batches'], 'max-open-batches'),
          rateLimitPerMinute: int(values['rate-limit'], 'rate-limit'),
          maxFiles: limit(values['max-files'], 'max-files') ?? undefined,
          maxStoredBytes: limit(values['max-stored-bytes'], 'max-stored-bytes') ?? undefined,
          dailySpendLimitUsd: dailyLimit(values['daily-limit']),
        }),
      ),
    )
  } else if (group === 'accounts' && command === 'set' && first) {
    const account = await accounts.updateAccount(first, {
      maxOpenBatches: int(values['max-open-batches'], 'max-open-batches'),
      rateLimitPerMinute: int(values['rate-limit'], 'rate-limit'),
      maxFiles: limit(values['max-files'], 'max-files'),
      maxStoredBytes: limit(values['max-stored-bytes'], 'max-stored-bytes'),
      dailySpendLimitUsd: dailyLimit(values['daily-limit']),
    })
    if (!account) fail(`no account ${first}`)
    print(renderAccount(account))
  } else if (group === 'accounts' && command === 'list') {
    // Every account, newest first, a page at a time.
    const all = []
    for (let after: string | null = null; ;) {
      const page = await accounts.listAccounts({ after, limit: 100 })
      all.push(...page.accounts.map(renderAccount))
      if (!page.hasMore || page.accounts.length === 0) break
      after = page.accounts.at(-1)!.id
    }
    print(all)
  } else if (group === 'keys' && command === 'list' && first) {
    const keys = await accounts.listKeys(first)
    if (!keys) fail(`no account ${first}`)
    print(keys.map(renderKey))
  } else if (group === 'accounts' && command === 'show' && first) {
    const account = await accounts.getAccount(first)
    if (!account) fail(`no account ${first}`)
    print(renderAccount(account))
  } else if (group === 'accounts' && command === 'credit' && first && second) {
    const amount = decimal(second, 'amount')!
    const before = await accounts.getAccount(first)
    if (!before) fail(`no account ${first}`)
    const problem = creditRemovalProblem(before.balanceUsd, amount)
    if (problem) fail(`the amount ${problem}`)
    const account = await accounts.addCredit(first, amount)
    if (!account) fail(`no account ${first}`)
    print(renderAccount(account))
    // Batches waiting for credit start at once on every instance, not at their next poll.
    if (!second.startsWith('-')) await tellInstances(NUDGE_CHANNEL, 'cli')
  } else if (group === 'keys' && command === 'create' && first) {
    const named = values.scopes?.split(',').map((s) => s.trim()) ?? [...ALL_SCOPES]
    const scopes = [...new Set(named)] as Scope[]
    const unknown = scopes.filter((s) => !ALL_SCOPES.includes(s))
    if (unknown.length) fail(`unknown scope ${unknown.join(', ')}; use ${ALL_SCOPES.join(', ')}`)
    const created = await accounts.createKey(first, {
      name: values.name ?? null,
      scopes,
      rateLimitPerMinute: int(values['rate-limit'], 'rate-limit') ?? null,
    })
    if (!created) fail(`no account ${first}`)
    print({ ...renderKey(created.record), key: created.key })
  } else if (group === 'keys' && command === 'revoke' && first) {
    const key = await accounts.revokeKey(first)
    if (!key) fail(`no key ${first}`)
    print(renderKey(key))
    // Revoked whatever happens next; a lost message leaves each instance's key cache as the bound.
    await tellInstances(KEY_REVOCATIONS_CHANNEL, key.id).catch((error: Error) =>
      console.error(
        `warning: the running instances were not told (${error.message}); they refuse the key within MULTIGRID_KEY_CACHE_MS`,
      ),
    )
  } else if (group === 'adapters' && command === 'register' && first && second && third) {
    if (!values.source) fail('--source is required: the path or URI the pool loads it from')
    const result = await fineTunes.register(first, {
      baseModel: second,
      name: third,
      rank: int(values.rank, 'rank') ?? fail('--rank is required'),
      sizeMib: int(values['size-mib'], 'size-mib') ?? fail('--size-mib is required'),
      source: values.source,
    })
    if (!('id' in result)) {
      if (result.kind === 'no_account') fail(`no account ${first}`)
      fail(result.kind === 'duplicate' ? result.message : `${result.param} ${result.message}`)
    }
    print(renderFineTune(result))
  } else if (group === 'adapters' && command === 'list' && first) {
    const list = await fineTunes.list(first)
    if (!list) fail(`no account ${first}`)
    print(list.map(renderFineTune))
  } else if (group === 'adapters' && command === 'deactivate' && first) {
    const fineTune = await fineTunes.deactivate(first)
    if (!fineTune) fail(`no fine-tune ${first}`)
    print(renderFineTune(fineTune))
  } else {
    fail(USAGE)
  }
} finally {
  await store.close()
}
