/**
 * The store: every piece of state that matters lives here, so several gateway instances can share
 * one PostgreSQL. Each consumer sees only the narrow part it needs: HTTP ingest admits batches,
 * the read side lists and streams them, the dispatcher leases and settles lines.
 *
 * The store is split by role: accounts, credit, files, fine-tunes, webhooks, retention, usage,
 * dispatch and batches each have a folder (src/store/<role>/) with their interface, both
 * dialects, their rows and their own contract suite (test/store/<role>.test.ts), given only a
 * connection (connection.ts). This file composes their types; the store classes
 * (sqlite/sqlite-store.ts, postgres/postgres-store.ts) compose their calls. Two dialects:
 * bun:sqlite (the embedded default) and PostgreSQL.
 * Money crosses this boundary as decimal strings.
 * Times: `*At` fields are Unix seconds; lease and retry times are Unix milliseconds.
 */
import type { ChunkStore } from './batch-chunks/chunk-store.ts'
import type { AccountStore, SessionStore } from './accounts/account-store.ts'
import type { DailySpendStore, LiveCreditStore } from './credit/credit-store.ts'
import type { FileStore, UploadStore } from './files/file-store.ts'
import type { FineTuneStore } from './fine-tunes/fine-tune-store.ts'
import type { PurgeStore, RetentionStore } from './retention/retention-store.ts'
import type { UsageStore } from './usage/usage-store.ts'
import type { WebhookStore } from './webhooks/webhook-store.ts'
import type { BatchStore } from './batches/batch-store.ts'
import type { DispatchStore } from './dispatch/dispatch-store.ts'

// The roles that have a folder of their own (src/store/<role>/): interface, both dialects, rows.
export type {
  AccountStore,
  AccountView,
  NewAccount,
  NewKey,
  NewSession,
  SessionStore,
} from './accounts/account-store.ts'
export type {
  DailyLimitRefusal,
  DailySpend,
  DailySpendStore,
  LiveCreditStore,
} from './credit/credit-store.ts'
export type {
  FileLimits,
  FileQuotaDefaults,
  FileQuotaView,
  FileRecord,
  FileStore,
  FileView,
  NewUpload,
  ReserveResult,
  UploadStore,
} from './files/file-store.ts'
export type {
  FineTuneStore,
  CreateFineTuneResult,
  NewFineTune,
} from './fine-tunes/fine-tune-store.ts'
export type { PurgeStore, RetentionStore } from './retention/retention-store.ts'
export type { UsageAddition, UsageRow, UsageStore } from './usage/usage-store.ts'
export type {
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryResult,
  DeliveryStatus,
  WebhookRecord,
  WebhookStore,
} from './webhooks/webhook-store.ts'
export type {
  AdmitResult,
  BatchErrorEntry,
  BatchStore,
  CancelResult,
  NewBatch,
  NewLine,
  RejectedBatch,
  WaitingPass,
} from './batches/batch-store.ts'
export type {
  CallsChange,
  ClaimedLine,
  DispatchStore,
  LaneFilter,
  LineAccounting,
  LineClaim,
  LineKey,
  LineOutcome,
  LinesEnded,
  AdvancedBatches,
  LineUsage,
  RecordedOutcomes,
  RunnableBatch,
} from './dispatch/dispatch-store.ts'
export { CHUNK_LINE_OWNER_PREFIX } from './dispatch/dispatch-store.ts'

/**
 * Every role with a folder of its own but dispatch (which comes apart, OpenedStore), as one type:
 * each store class sets them on itself from the roles' factories (the connection is all a role
 * is given).
 */
export type RoleStores = BatchStore &
  AccountStore &
  SessionStore &
  DailySpendStore &
  LiveCreditStore &
  FileStore &
  UploadStore &
  FineTuneStore &
  WebhookStore &
  PurgeStore &
  UsageStore

/** Everything but the dispatcher's calls, which come apart (OpenedStore). */
export interface Store extends RetentionStore, RoleStores {
  readonly kind: 'sqlite' | 'postgres'
  ping(): Promise<void>
  /** Closes its connections, the dispatch part's (and its thread) included. */
  close(): Promise<void>
}

/**
 * A store as opened: the dispatcher's part apart from the rest. For a SQLite file and for
 * PostgreSQL `dispatch` runs on a thread with a connection of its own (dispatch/dispatch-thread.ts), so
 * claiming and recording do not hold up the event loop; in memory it shares the connection.
 */
export interface OpenedStore {
  store: Store
  dispatch: DispatchStore
  /** The batch lanes' chunk intents (docs/batch-lanes.md; batch-chunks/chunk-store.ts). */
  chunks: ChunkStore
}
