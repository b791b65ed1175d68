/** The admin API (docs/operations.md), on only when MULTIGRID_ADMIN_TOKEN is set. */
import { Elysia } from 'elysia'
import { bearerToken, bearerTokenMatches } from '../auth/bearer-token.ts'
import { KEY_PREFIX } from '../auth/keys.ts'
import { z } from 'zod'
import type { Accounts } from '../accounts/accounts.ts'
import type { FineTunes } from '../accounts/fine-tunes.ts'
import { ALL_SCOPES } from '../domain.ts'
import { badRequest, notFound, refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import { describeZodIssue } from '../ingest/issues.ts'
import { creditAmountProblem, creditRemovalProblem } from '../money/credit-amount.ts'
import { readJsonBody, type BodyLimit } from '../ingest/read-body.ts'
import { wholeNumberText } from '../schemas/whole-number.ts'
import { parseQuery } from './parse-query.ts'
import { renderAccount, renderFineTune, renderKey } from './render-admin.ts'
import { renderPage } from './render-page.ts'

/** A bounded, exact credit amount (src/money/credit-amount.ts); `signed`: it may be negative. */
const amount = (signed: boolean) =>
  z.string().superRefine((text, context) => {
    const problem = creditAmountProblem(text, signed)
    if (problem) context.addIssue({ code: 'custom', message: problem })
  })
const decimal = amount(true)

// The stores keep these counts as 32-bit integers (PostgreSQL `int`).
const count = z.int().min(1).max(2_147_483_647)
// File quotas (docs/money-and-limits.md); 0 is allowed: no uploads at all.
const maxFiles = z.int().min(0).max(2_147_483_647)
const maxStoredBytes = z.int().min(0).max(Number.MAX_SAFE_INTEGER)

/** docs/money-and-limits.md: a decimal string ≥ 0, or null for no daily limit. */
const dailyLimit = amount(false).nullable()

export const createAccountBody = z.strictObject({
  name: z.string().min(1).max(256),
  // A new account starts at zero or above: the balance never goes below zero.
  credit_usd: amount(false).optional(),
  max_open_batches: count.optional(),
  rate_limit_per_minute: count.optional(),
  max_files: maxFiles.optional(),
  max_stored_bytes: maxStoredBytes.optional(),
  daily_spend_limit_usd: dailyLimit.optional(),
})
/** Account settings; null puts a file limit back to the configured default, and lifts the daily limit. The open-batch and rate limits take a number. */
export const patchAccountBody = z.strictObject({
  max_open_batches: count.optional(),
  rate_limit_per_minute: count.optional(),
  max_files: maxFiles.nullable().optional(),
  max_stored_bytes: maxStoredBytes.nullable().optional(),
  daily_spend_limit_usd: dailyLimit.optional(),
})
export const creditBody = z.strictObject({ amount_usd: decimal })
export const createKeyBody = z.strictObject({
  name: z.string().max(256).optional(),
  scopes: z
    .array(z.enum(ALL_SCOPES as [string, ...string[]]))
    .min(1)
    .optional(),
  rate_limit_per_minute: count.optional(),
})

/** The accounts list's page: newest first, as the batches list pages. */
export const listAccountsQuery = z.object({
  limit: wholeNumberText(1, 100, 100).default(100),
  after: z.string().min(1).optional(),
})

export const createFineTuneBody = z.strictObject({
  base_model: z.string().min(1).max(256),
  name: z.string().min(1).max(64),
  rank: z.int().min(1).max(100_000),
  size_mib: z.int().min(1).max(1_000_000),
  // Where the pool's servers load it from; handed to them as it is (vLLM's lora_path).
  source: z.string().min(1).max(2048),
})

/** The body, read only now that the token has been checked (every route has parse: 'none'). */
async function parseBody<S extends z.ZodType>(
  schema: S,
  request: Request,
  limit: BodyLimit,
): Promise<z.output<S>> {
  const read = await readJsonBody(request, limit)
  if (!read.ok)
    throw badRequest(
      'the body is not valid JSON; send one JSON object with the fields the endpoint takes',
    )
  const parsed = schema.safeParse(read.value ?? {}, { reportInput: true })
  if (parsed.success) return parsed.data
  const issue = describeZodIssue(parsed.error.issues[0], '', 'the body')
  throw badRequest(`${issue.path || 'body'} ${issue.message}; ${issue.fix}`, issue.path || null)
}

/** Refuses a header without the admin token, saying what to send. */
function checkAdminToken(expected: Buffer, authorization: string | null) {
  if (bearerTokenMatches(authorization, expected)) return
  // An API key sent here is the likely mistake: say so, without saying whether it is valid.
  throw refuse(
    'invalid_admin_token',
    bearerToken(authorization)?.startsWith(KEY_PREFIX)
      ? 'that is an API key, not the admin token: the admin API takes "Authorization: Bearer <MULTIGRID_ADMIN_TOKEN>"'
      : 'missing or wrong admin token: send "Authorization: Bearer <MULTIGRID_ADMIN_TOKEN>"',
  )
}

export function adminRoutes(
  token: string,
  accounts: Accounts,
  bodyLimit: BodyLimit,
  fineTunes: FineTunes,
) {
  const expected = Buffer.from(token)
  const check = (authorization: string | null) => checkAdminToken(expected, authorization)
  return (
    new Elysia({ name: 'admin', prefix: '/admin/v1' })
      // Before anything is read: a wrong token is refused without its body.
      .onBeforeHandle(({ request }) => check(request.headers.get('authorization')))
      .post(
        '/accounts',
        async ({ request, set }) => {
          const input = await parseBody(createAccountBody, request, bodyLimit)
          set.status = 201
          return renderAccount(
            await accounts.createAccount({
              name: input.name,
              creditUsd: input.credit_usd ?? '0',
              maxOpenBatches: input.max_open_batches,
              rateLimitPerMinute: input.rate_limit_per_minute,
              maxFiles: input.max_files,
              maxStoredBytes: input.max_stored_bytes,
              dailySpendLimitUsd: input.daily_spend_limit_usd,
            }),
          )
        },
        { parse: 'none' },
      )
      .patch(
        '/accounts/:id',
        async ({ params, request }) => {
          const input = await parseBody(patchAccountBody, request, bodyLimit)
          const account = await accounts.updateAccount(params.id, {
            maxOpenBatches: input.max_open_batches,
            rateLimitPerMinute: input.rate_limit_per_minute,
            maxFiles: input.max_files,
            maxStoredBytes: input.max_stored_bytes,
            dailySpendLimitUsd: input.daily_spend_limit_usd,
          })
          if (!account) throw notFound(`account ${excerpt(params.id)}`)
          return renderAccount(account)
        },
        { parse: 'none' },
      )
      .get('/accounts', async ({ request }) => {
        const query = parseQuery(listAccountsQuery, request.url)
        const page = await accounts.listAccounts({ after: query.after ?? null, limit: query.limit })
        return renderPage(page.accounts.map(renderAccount), page.hasMore, (account) => account.id)
      })
      .get('/accounts/:id/keys', async ({ params }) => {
        const keys = await accounts.listKeys(params.id)
        if (!keys) throw notFound(`account ${excerpt(params.id)}`)
        return { object: 'list', data: keys.map(renderKey) }
      })
      .get('/accounts/:id', async ({ params }) => {
        const account = await accounts.getAccount(params.id)
        if (!account) throw notFound(`account ${excerpt(params.id)}`)
        return renderAccount(account)
      })
      .post(
        '/accounts/:id/credits',
        async ({ params, request }) => {
          const input = await parseBody(creditBody, request, bodyLimit)
          const before = await accounts.getAccount(params.id)
          if (!before) throw notFound(`account ${excerpt(params.id)}`)
          const problem = creditRemovalProblem(before.balanceUsd, input.amount_usd)
          if (problem) throw badRequest(`amount_usd ${problem}`, 'amount_usd')
          const account = await accounts.addCredit(params.id, input.amount_usd)
          if (!account) throw notFound(`account ${excerpt(params.id)}`)
          return renderAccount(account)
        },
        { parse: 'none' },
      )
      .post(
        '/accounts/:id/keys',
        async ({ params, request, set }) => {
          const input = await parseBody(createKeyBody, request, bodyLimit)
          const created = await accounts.createKey(params.id, {
            name: input.name ?? null,
            // Each scope once, however often it was named.
            scopes: [...new Set(input.scopes ?? ALL_SCOPES)] as (typeof ALL_SCOPES)[number][],
            rateLimitPerMinute: input.rate_limit_per_minute ?? null,
          })
          if (!created) throw notFound(`account ${excerpt(params.id)}`)
          set.status = 201
          return { ...renderKey(created.record), key: created.key }
        },
        { parse: 'none' },
      )
      .post(
        '/accounts/:id/adapters',
        async ({ params, request, set }) => {
          const input = await parseBody(createFineTuneBody, request, bodyLimit)
          const result = await fineTunes.register(params.id, {
            baseModel: input.base_model,
            name: input.name,
            rank: input.rank,
            sizeMib: input.size_mib,
            source: input.source,
          })
          if ('id' in result) {
            set.status = 201
            return renderFineTune(result)
          }
          if (result.kind === 'no_account') throw notFound(result.message)
          if (result.kind === 'duplicate')
            throw refuse('adapter_exists', result.message, { param: result.param })
          throw badRequest(`${result.param} ${result.message}`, result.param)
        },
        { parse: 'none' },
      )
      .get('/accounts/:id/adapters', async ({ params }) => {
        const list = await fineTunes.list(params.id)
        if (!list) throw notFound(`account ${excerpt(params.id)}`)
        return { object: 'list', data: list.map(renderFineTune) }
      })
      // The id is URL-encoded (its ':' are %3A); Elysia hands the parameter over decoded.
      .delete(
        '/adapters/:id',
        async ({ params }) => {
          const fineTune = await fineTunes.deactivate(params.id)
          if (!fineTune) throw notFound(`fine-tune ${excerpt(params.id)}`)
          return renderFineTune(fineTune)
        },
        { parse: 'none' },
      )
      .delete(
        '/keys/:id',
        async ({ params }) => {
          const key = await accounts.revokeKey(params.id)
          if (!key) throw notFound(`key ${excerpt(params.id)}`)
          return renderKey(key)
        },
        { parse: 'none' },
      )
  )
}
