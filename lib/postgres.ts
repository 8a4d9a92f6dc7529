// agent-lanes/postgres: a run journal and a snapshot store on PostgreSQL (docs/resuming.md).
// The pool or client is met by its shape (node-postgres 8+): this entry does not import pg.
export { PostgresRunJournal, type PgClientLike, type PgPoolLike, type PostgresRunJournalOptions } from './journal/PostgresRunJournal.js';
export { PostgresSnapshotStore, type PostgresSnapshotStoreOptions } from './journal/PostgresSnapshotStore.js';
export type { JournalTables } from './journal/schema.js';
