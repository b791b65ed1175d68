/**
 * The admin API (docs/operations.md, on only when MULTIGRID_ADMIN_TOKEN is set) and the dashboard's
 * routes (docs/dashboard-and-cli.md: HTML for a browser, listed so the document misses no route).
 */
import {
  createAccountBody,
  createFineTuneBody,
  createKeyBody,
  creditBody,
  listAccountsQuery,
  patchAccountBody,
} from '../admin.ts'
import type { Operations } from './operation.ts'

export const ADMIN_OPERATIONS: Operations = {
  'POST /admin/v1/accounts': {
    id: 'adminCreateAccount',
    summary: 'Create an account',
    docs: 'docs/operations.md',
    security: 'admin',
    body: { json: createAccountBody },
    answers: { 201: { description: 'the account', json: 'Account' } },
  },
  'GET /admin/v1/accounts': {
    id: 'adminListAccounts',
    summary: 'The accounts, newest first (`after` an account id for the next page)',
    docs: 'docs/operations.md',
    security: 'admin',
    query: listAccountsQuery,
    answers: { 200: { description: 'a page of accounts', json: 'AccountList' } },
  },
  'GET /admin/v1/accounts/{id}/keys': {
    id: 'adminListKeys',
    summary: "An account's keys, newest first, revoked ones too (never the keys themselves)",
    docs: 'docs/operations.md',
    security: 'admin',
    answers: { 200: { description: 'the keys', json: 'ApiKeyList' } },
  },
  'GET /admin/v1/accounts/{id}': {
    id: 'adminGetAccount',
    summary: 'An account: its credit, limits and use',
    docs: 'docs/operations.md',
    security: 'admin',
    answers: { 200: { description: 'the account', json: 'Account' } },
  },
  'PATCH /admin/v1/accounts/{id}': {
    id: 'adminUpdateAccount',
    summary: "Change an account's file quotas or daily spend limit (null: back to the default)",
    docs: 'docs/money-and-limits.md',
    security: 'admin',
    body: { json: patchAccountBody },
    answers: { 200: { description: 'the account', json: 'Account' } },
  },
  'POST /admin/v1/accounts/{id}/credits': {
    id: 'adminAddCredit',
    summary: 'Add (or with a negative amount, take) credit',
    docs: 'docs/money-and-limits.md',
    security: 'admin',
    body: { json: creditBody },
    answers: { 200: { description: 'the account', json: 'Account' } },
  },
  'POST /admin/v1/accounts/{id}/keys': {
    id: 'adminCreateKey',
    summary: 'Make a key; the answer is the only one with the key itself',
    docs: 'docs/operations.md',
    security: 'admin',
    body: { json: createKeyBody, required: false },
    answers: { 201: { description: 'the key', json: 'ApiKeyCreated' } },
  },
  'DELETE /admin/v1/keys/{id}': {
    id: 'adminRevokeKey',
    summary: 'Revoke a key',
    docs: 'docs/operations.md',
    security: 'admin',
    answers: { 200: { description: 'the key, revoked', json: 'ApiKey' } },
  },
  'POST /admin/v1/accounts/{id}/adapters': {
    id: 'adminRegisterAdapter',
    summary: 'Register a fine-tune (a LoRA adapter) for an account',
    docs: 'docs/open-models.md',
    security: 'admin',
    body: { json: createFineTuneBody },
    answers: { 201: { description: 'the fine-tune', json: 'Adapter' } },
  },
  'GET /admin/v1/accounts/{id}/adapters': {
    id: 'adminListAdapters',
    summary: "An account's fine-tunes",
    docs: 'docs/open-models.md',
    security: 'admin',
    answers: { 200: { description: 'the fine-tunes', json: 'AdapterList' } },
  },
  'DELETE /admin/v1/adapters/{id}': {
    id: 'adminDeactivateAdapter',
    summary: 'Deactivate a fine-tune (its id URL-encoded)',
    docs: 'docs/open-models.md',
    security: 'admin',
    answers: { 200: { description: 'the fine-tune, inactive', json: 'Adapter' } },
  },
}

const page = (description: string) => ({ 200: { description, media: 'text/html' as const } })
const seeOther = { 303: { description: 'see other: the page to go to next' } }
const form = (description: string) => ({
  form: { type: 'object', additionalProperties: { type: 'string' } },
  description,
})

/** A form's address asked with GET (the address bar, where a refused post leaves the browser). */
const formAddress = (id: string, to: string) => ({
  id,
  summary: `A form's address opened in the address bar: on to ${to}`,
  security: 'none' as const,
  answers: seeOther,
})

export const DASHBOARD_OPERATIONS: Operations = {
  'GET /': {
    id: 'dashboardHome',
    summary: "The dashboard: the signed-in account's batches, or the sign-in page",
    docs: 'docs/dashboard-and-cli.md',
    security: 'session',
    answers: page('the page'),
  },
  'GET /dashboard': {
    id: 'dashboardRedirect',
    summary: 'The dashboard, at /',
    security: 'none',
    answers: seeOther,
  },
  'GET /dashboard/sign-in': formAddress('dashboardSignInAddress', '/'),
  'GET /dashboard/sign-out': formAddress('dashboardSignOutAddress', '/'),
  'GET /dashboard/batches': formAddress('dashboardSubmitAddress', '/'),
  'GET /dashboard/batches/{id}/cancel': formAddress('dashboardCancelAddress', "the batch's page"),
  'GET /dashboard/batches/{id}/retry': formAddress('dashboardRetryAddress', "the batch's page"),
  'GET /dashboard/usage': {
    id: 'dashboardUsage',
    summary: 'The usage page',
    docs: 'docs/dashboard-and-cli.md',
    security: 'session',
    answers: page('the page'),
  },
  'POST /dashboard/sign-in': {
    id: 'dashboardSignIn',
    summary: 'Sign in with an API key: a server-side session in an HttpOnly cookie',
    docs: 'docs/dashboard-and-cli.md',
    security: 'none',
    body: form('the field `key`'),
    answers: { ...seeOther, ...page('the sign-in page, with what was wrong') },
  },
  'POST /dashboard/sign-out': {
    id: 'dashboardSignOut',
    summary: 'End the session',
    security: 'session',
    answers: seeOther,
  },
  'POST /dashboard/batches': {
    id: 'dashboardSubmitBatch',
    summary: "Submit a file from the page's form (the native submit's options as fields)",
    docs: 'docs/dashboard-and-cli.md',
    security: 'session',
    body: {
      multipart: { type: 'object', additionalProperties: true },
      description: 'the field `file` and the options of POST /v1/batches',
    },
    answers: { ...seeOther, ...page('the page, with what was wrong') },
  },
  'GET /dashboard/batches/{id}': {
    id: 'dashboardBatch',
    summary: "A batch's page",
    security: 'session',
    answers: page('the page'),
  },
  'POST /dashboard/batches/{id}/cancel': {
    id: 'dashboardCancelBatch',
    summary: 'Cancel from the page',
    security: 'session',
    answers: seeOther,
  },
  'POST /dashboard/batches/{id}/retry': {
    id: 'dashboardRetryBatch',
    summary: 'Retry from the page',
    security: 'session',
    body: form('the options of POST /v1/batches/{id}/retry'),
    answers: seeOther,
  },
  'GET /dashboard/batches/{id}/events': {
    id: 'dashboardBatchEvents',
    summary: "The batch page's progress stream",
    security: 'session',
    answers: { 200: { description: 'as GET /v1/batches/{id}/events', media: 'text/event-stream' } },
  },
  'GET /dashboard/batches/{id}/results': {
    id: 'dashboardBatchResults',
    summary: 'Download the results',
    security: 'session',
    answers: {
      200: { description: 'as GET /v1/batches/{id}/results', jsonl: 'NativeResultLine' },
    },
  },
  'GET /dashboard/assets/batch-page.js': {
    id: 'dashboardBatchPageScript',
    summary: "The batch page's script",
    security: 'none',
    answers: { 200: { description: 'the script', media: 'application/javascript' } },
  },
}
