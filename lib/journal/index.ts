export { InMemoryRunJournal } from './InMemoryRunJournal.js';
export { PostgresRunJournal, type PgClientLike, type PgPoolLike, type PostgresRunJournalOptions } from './PostgresRunJournal.js';
export type { JournalTables } from './schema.js';
export { PostgresSnapshotStore, type PostgresSnapshotStoreOptions } from './PostgresSnapshotStore.js';
