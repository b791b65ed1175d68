/**
 * Settling a dispatcher's outcomes in one transaction, a fixed number of statements however many
 * outcomes there are. Only lines `owner` still leases count (graphile-worker's `locked_by`
 * rule); the others were reaped and belong to another instance now.
 *
 * Billing is the embedded store's, outcome by outcome in the order given: each line is charged
 * its cost but never more than the account's balance, taken from its batch's hold first — but
 * no more than its ceiling from the hold, when it overran that (`ceilingUsd`): the rest of the
 * hold stays for the batch's other lines. With costs ≥ 0 that sequential rule has a closed form,
 * computed with window functions in exact `numeric`:
 *   charged_i  = LEAST(cost_i, GREATEST(0, balance − Σ cost_j, earlier lines of the account))
 *   holdable_i = LEAST(charged_i, ceiling_i)   (charged_i when the line did not overrun)
 *   released_i = LEAST(holdable_i, GREATEST(0, hold − Σ holdable_j, earlier lines of the batch))
 * (once the balance reaches zero it stays there, so the running balance is that GREATEST; the
 * hold is drawn down by the holdable amounts until it is empty, so its running value is too).
 */
import type postgres from 'postgres'
import { Money, moneyText } from '../../money/decimal.ts'
import type {
  CallsChange,
  LineOutcome,
  OutcomesRecord,
  RecordedOutcomes,
} from './dispatch-store.ts'
import { addProgress } from './postgres-batch-progress.ts'
import { capRoomBack, movedBackCounts } from './postgres-return-to-pending.ts'
import { storableString } from '../postgres/storable.ts'
import { drawn } from '../credit/postgres-account-ledger.ts'

type Settled = Exclude<LineOutcome, { kind: 'retry' }>
type Retry = Extract<LineOutcome, { kind: 'retry' }>

// An upstream that sends U+0000 or a lone surrogate must not wedge settlement.
const pgText = storableString

const lineKey = (batchId: string, lineNo: number) => `${batchId}\u0000${lineNo}`

export async function recordOutcomes(
  tx: postgres.TransactionSql,
  { owner, outcomes, nowMs, calls = [] }: OutcomesRecord,
  exclusive = false,
): Promise<RecordedOutcomes> {
  const now = Math.floor(nowMs / 1000)
  const charged: (string | null)[] = outcomes.map(() => null)
  const writeCalls = async () => {
    if (calls.length > 0) await callsStatement(tx, owner, calls)
    return { recorded: 0, charged }
  }
  if (outcomes.length === 0) return writeCalls()
  // Lock order: the lines, then their batches if capped, then accounts. The counters go to this
  // owner's progress shard (postgres-batch-progress.ts), so an uncapped batch's row is not locked at all;
  // a capped one's is, as its claims lock it, so a charge over a line's ceiling is seen by the
  // next claim's room. The part of each charge its hold covers goes to this owner's shard of the
  // account's ledger (postgres-account-ledger.ts) under a FOR KEY SHARE lock of the account row,
  // which settlements of other owners do not wait for; only accounts with a charge past a line's
  // ceiling are locked FOR UPDATE, for the excess taken from the balance on the row (and every
  // account, when the guard in settleStatement sent the settlement back). Other transactions that take a batch first do
  // not then wait for these lines: claims skip locked lines, and cancel and expiry touch only
  // pending ones (these are running). The reaper could, for a line whose lease ran out while
  // this owner stalled; PostgreSQL then aborts one of the two, and each is retried (the
  // recorder keeps its outcomes, the reaper runs again), the line ending once either way.
  //
  // The lines are looked up by primary key alone, and whether they are still running under this
  // owner's lease is checked here: with that condition in the query, the planner may go through
  // the partial index of leased lines instead, which keeps an entry for every line ever claimed
  // until a vacuum (15 ms a call at 25,000 lines, with the statistics a fresh batch has). A line
  // that is another owner's now is locked until this transaction ends, and left as it is.
  const found = await tx`
    SELECT batch_id, line_no, status, lease_owner FROM lines
    WHERE (batch_id, line_no) IN (
        SELECT * FROM unnest(${outcomes.map((o) => o.batchId)}::text[],
                             ${outcomes.map((o) => o.lineNo)}::int[]))
    ORDER BY batch_id, line_no FOR UPDATE`
  const open = new Set(
    found
      .filter((row) => row.status === 'running' && row.lease_owner === owner)
      .map((row) => lineKey(row.batch_id, Number(row.line_no))),
  )
  const retries: Retry[] = []
  const settled: Settled[] = []
  /** Where each settled outcome is in `outcomes`. */
  const settledAt: number[] = []
  outcomes.forEach((outcome, at) => {
    // A line is recorded once: a second outcome for it in the same call is ignored, as it is
    // when it arrives in a later call.
    if (!open.delete(lineKey(outcome.batchId, outcome.lineNo))) return
    if (outcome.kind === 'retry') {
      retries.push(outcome)
      charged[at] = '0'
    } else {
      settled.push(outcome)
      settledAt.push(at)
    }
  })
  if (retries.length === 0 && settled.length === 0) return writeCalls()
  const batchIds = [...new Set([...retries, ...settled].map((outcome) => outcome.batchId))].sort()
  const settledBatchIds = [...new Set(settled.map((outcome) => outcome.batchId))]
  const rows = settlementRows(settled)
  // A charge past a line's ceiling takes the excess from the account's balance on its row: the
  // accounts of those batches (of every batch, when retried `exclusive`) are locked FOR UPDATE.
  const exclusiveBatchIds = exclusive
    ? settledBatchIds
    : [...new Set(rows.filter((row) => row.ceiling !== null).map((row) => row.batch_id))]
  // Sent together, one after another in this order (execute() starts each one now; postgres.js
  // pipelines what a transaction has not awaited yet) and run by the server in that order: the
  // rows locked stay locked for one round trip and the commit instead of four. Each statement
  // reads in a snapshot taken after the ones before it, so after the locks.
  const sent = [
    tx`SELECT id FROM batches WHERE id = ANY(${batchIds}::text[]) AND max_cost_usd IS NOT NULL
       ORDER BY id FOR UPDATE`.execute(),
    exclusiveBatchIds.length > 0
      ? tx`SELECT id FROM accounts
           WHERE id IN (SELECT account_id FROM batches WHERE id = ANY(${exclusiveBatchIds}::text[]))
           ORDER BY id FOR UPDATE`.execute()
      : null,
    rows.length > 0
      ? tx`SELECT id FROM accounts
           WHERE id IN (SELECT account_id FROM batches WHERE id = ANY(${settledBatchIds}::text[]))
           ORDER BY id FOR KEY SHARE`.execute()
      : null,
    retries.length > 0 ? retryStatement(tx, retries, owner).execute() : null,
  ]
  // It answers the lines the balance cut short, with what each was charged.
  const settlement =
    rows.length > 0 ? settleStatement(tx, rows, { now, owner, exclusiveBatchIds }).execute() : null
  sent.push(settlement, calls.length > 0 ? callsStatement(tx, owner, calls).execute() : null)
  await Promise.all(sent)
  // Each settled line was charged its cost but those the statement says the balance cut short.
  rows.forEach((row, i) => (charged[settledAt[i]!] = row.cost))
  for (const { ord, charged: usd } of (await settlement) ?? [])
    charged[settledAt[Number(ord) - 1]!] = moneyText(usd)
  return { recorded: retries.length + settled.length, charged }
}

function retryStatement(tx: postgres.TransactionSql, retries: Retry[], owner: string) {
  return tx`
    WITH retry AS (
      SELECT * FROM unnest(${retries.map((r) => r.batchId)}::text[],
                           ${retries.map((r) => r.lineNo)}::int[],
                           ${retries.map((r) => Math.ceil(r.notBefore))}::bigint[],
                           ${retries.map((r) => (r.unsent ? 1 : 0))}::int[])
        AS retry (batch_id, line_no, not_before, unsent)),
    moved AS (
      UPDATE lines l SET status = 'pending', lease_owner = NULL, lease_until = NULL,
        not_before = retry.not_before, attempts = l.attempts - retry.unsent
      FROM retry WHERE l.batch_id = retry.batch_id AND l.line_no = retry.line_no
      RETURNING l.batch_id, l.ceiling_usd)
    ${movedBackCounts(tx, owner)}`
}

/** The outcomes as the settlement statement reads them; throws on a negative cost. */
function settlementRows(settled: Settled[]) {
  return settled.map((outcome) => {
    const cost = moneyText(outcome.costUsd)
    if (new Money(cost).isNegative())
      throw new Error(`line ${outcome.lineNo}: negative cost ${cost}`)
    const failed = outcome.kind === 'failed'
    return {
      batch_id: outcome.batchId,
      line_no: outcome.lineNo,
      kind: outcome.kind,
      cost,
      ceiling:
        outcome.kind === 'succeeded' && outcome.ceilingUsd !== undefined
          ? moneyText(outcome.ceilingUsd)
          : null,
      response_status: outcome.responseStatus,
      response: failed ? null : pgText(outcome.response),
      error_code: failed ? outcome.error.code : null,
      error_message: failed ? pgText(outcome.error.message) : null,
      error_upstream:
        failed && outcome.error.upstream !== undefined
          ? JSON.stringify(outcome.error.upstream)
          : null,
      provider: pgText(outcome.provider),
      latency_ms: outcome.latencyMs,
      ...tokensOf(outcome),
    }
  })
}

/** A billed line's tokens by class (docs/pricing.md), for its batch's usage; none for an unbilled failure. */
function tokensOf(outcome: Settled) {
  const usage =
    outcome.kind === 'succeeded' || outcome.kind === 'failed' ? outcome.usage : undefined
  return {
    input_tokens: usage?.input ?? 0,
    cached_tokens: usage?.cached ?? 0,
    written_tokens: usage?.written ?? 0,
    output_tokens: usage?.output ?? 0,
    uncached_cost: usage ? moneyText(usage.uncachedCostUsd) : '0',
  }
}

/** This owner's calls in flight per batch and provider, moved by the changes since its last write. */
function callsStatement(tx: postgres.TransactionSql, owner: string, calls: readonly CallsChange[]) {
  return tx`
    INSERT INTO batch_providers (batch_id, provider, owner, running)
    SELECT batch_id, provider, ${owner}, sum(delta)::int
    FROM unnest(${calls.map((c) => c.batchId)}::text[], ${calls.map((c) => c.provider)}::text[],
                ${calls.map((c) => c.delta)}::int[]) AS c (batch_id, provider, delta)
    GROUP BY batch_id, provider ORDER BY batch_id, provider
    ON CONFLICT (batch_id, provider, owner) DO UPDATE SET
      running = batch_providers.running + excluded.running`
}

function settleStatement(
  tx: postgres.TransactionSql,
  rows: ReturnType<typeof settlementRows>,
  pass: { now: number; owner: string; exclusiveBatchIds: readonly string[] },
) {
  const { now, owner, exclusiveBatchIds } = pass
  return tx`
    WITH outcome AS (
      SELECT * FROM ROWS FROM (jsonb_to_recordset(${tx.json(rows)}) AS (
          batch_id text, line_no int, kind text, cost numeric, ceiling numeric,
          response_status int, response text, error_code text, error_message text,
          error_upstream text, provider text, latency_ms int, input_tokens bigint,
          cached_tokens bigint, written_tokens bigint, output_tokens bigint, uncached_cost numeric))
        WITH ORDINALITY AS o (batch_id, line_no, kind, cost, ceiling, response_status, response,
          error_code, error_message, error_upstream, provider, latency_ms, input_tokens,
          cached_tokens, written_tokens, output_tokens, uncached_cost, ord)),
    priced AS (
      SELECT outcome.*, b.account_id, a.balance_usd - ${drawn(tx)} AS balance_usd,
        a.balance_usd < a.held_usd AS short_of_held,
        b.id = ANY(${[...exclusiveBatchIds]}::text[]) AS exclusive,
        b.held_usd + coalesce((SELECT sum(held_usd) FROM batch_progress p WHERE p.batch_id = b.id), 0)
          AS batch_held,
        coalesce(sum(outcome.cost) OVER (PARTITION BY b.account_id ORDER BY outcome.ord
          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS cost_before
      FROM outcome
        JOIN batches b ON b.id = outcome.batch_id
        JOIN accounts a ON a.id = b.account_id),
    charged AS (
      SELECT priced.*, LEAST(cost, GREATEST(0, balance_usd - cost_before)) AS charged FROM priced),
    holdable AS (
      SELECT charged.*, LEAST(charged, coalesce(ceiling, charged)) AS holdable FROM charged),
    billed AS (
      SELECT holdable.*, LEAST(holdable, GREATEST(0, batch_held - coalesce(sum(holdable) OVER (
          PARTITION BY batch_id ORDER BY ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)))
        AS released
      FROM holdable),
    line_update AS (
      UPDATE lines l SET status = billed.kind, lease_owner = NULL, lease_until = NULL,
        response_status = billed.response_status, response = billed.response,
        error_code = billed.error_code, error_message = billed.error_message,
        error_upstream = billed.error_upstream, cost_usd = billed.charged,
        provider = billed.provider, latency_ms = billed.latency_ms, finished_at = ${now}
      FROM billed WHERE l.batch_id = billed.batch_id AND l.line_no = billed.line_no
      RETURNING l.batch_id, l.ceiling_usd),
    unreserved AS (
      SELECT batch_id, coalesce(sum(ceiling_usd), 0) AS reserved FROM line_update GROUP BY batch_id),
    progress AS (
      ${addProgress(
        tx,
        owner,
        tx`SELECT t.batch_id, 0 AS pending, -t.n AS running, t.succeeded, t.failed,
             t.charged AS cost_usd, -t.released AS held_usd,
             -coalesce(u.reserved, 0) AS reserved_usd, t.input_tokens AS usage_input_tokens,
             t.cached_tokens AS usage_cached_input_tokens,
             t.written_tokens AS usage_cache_write_tokens, t.output_tokens AS usage_output_tokens,
             t.uncached_cost AS usage_uncached_cost_usd
           FROM (SELECT batch_id, count(*)::int AS n,
                   count(*) FILTER (WHERE kind = 'succeeded')::int AS succeeded,
                   count(*) FILTER (WHERE kind = 'failed')::int AS failed,
                   sum(charged) AS charged, sum(released) AS released,
                   sum(input_tokens) AS input_tokens, sum(cached_tokens) AS cached_tokens,
                   sum(written_tokens) AS written_tokens, sum(output_tokens) AS output_tokens,
                   sum(uncached_cost) AS uncached_cost
                 FROM billed GROUP BY batch_id) t
             LEFT JOIN unreserved u ON u.batch_id = t.batch_id`,
      )}
      RETURNING 1),
    room_back AS (${capRoomBack(tx, tx`unreserved`)}),
    share_update AS (
      INSERT INTO batch_providers (batch_id, provider, owner, succeeded, failed, cost_usd)
      SELECT batch_id, provider, ${owner}, count(*) FILTER (WHERE kind = 'succeeded')::int,
        count(*) FILTER (WHERE kind = 'failed')::int, sum(charged)
      FROM billed WHERE provider IS NOT NULL GROUP BY batch_id, provider
      ON CONFLICT (batch_id, provider, owner) DO UPDATE SET
        succeeded = batch_providers.succeeded + excluded.succeeded,
        failed = batch_providers.failed + excluded.failed,
        cost_usd = batch_providers.cost_usd + excluded.cost_usd
      RETURNING 1),
    per_account AS (
      SELECT account_id, sum(released) AS released, sum(charged) - sum(released) AS excess,
        ${ledgerGuard(tx)} AS guard
      FROM billed GROUP BY account_id),
    ledger AS (
      INSERT INTO account_ledger AS al (account_id, owner, drawn_usd)
      SELECT account_id, ${owner}, released FROM per_account WHERE guard AND released > 0
      ORDER BY account_id
      ON CONFLICT (account_id, owner) DO UPDATE SET drawn_usd = al.drawn_usd + excluded.drawn_usd
      RETURNING 1),
    excess AS (
      UPDATE accounts a SET balance_usd = a.balance_usd - t.excess
      FROM per_account t WHERE a.id = t.account_id AND t.guard AND t.excess > 0
      RETURNING 1)
    SELECT ord, charged::text FROM billed WHERE charged < cost`
}

/** Marks the error ledgerGuard raises: the settlement is to be retried `exclusive`. */
export const LEDGER_SHORT = 'account_ledger_short'

/**
 * True for an account of `billed` (grouped by account) whose settlement may go on under the
 * shared lock; an error for one that may not. Concurrent settlements of one account under that
 * lock each take from the batch's hold at most the ceilings of their own lines, which the hold
 * covers (a capped batch's row is locked anyway), and the balance covers the held credit: so
 * they need no order among them while every charge is in the hold (released = charged) and the
 * balance is not below the held credit. Otherwise (a hold drained, the balance below it) the
 * charge must be exact against the balance others are changing: the error (raised per row, so
 * the planner cannot fold it) rolls this settlement back, and the caller runs it again with the
 * account locked FOR UPDATE.
 */
const ledgerGuard = (db: postgres.TransactionSql) => db`
  CASE WHEN bool_or(exclusive) OR (sum(charged) = sum(released) AND NOT bool_or(short_of_held))
    THEN true
    ELSE CAST(${LEDGER_SHORT + ': '} || account_id AS int) = 0 END`
