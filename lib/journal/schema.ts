// The PostgreSQL journal's schema and statements, in one place: two tables under a prefix of the
// user's choosing, in a schema of the user's choosing. `runs` holds each run's lease (who owns
// it, until when); `entries` holds each run's journal in order: a row per run per flush, its
// entries a JSON array (a busy runner writes several entries of a run at once: one row is far
// cheaper for PostgreSQL than one per entry).
import { ConfigError } from '../errors.js';
import { describeValue } from '../config/index.js';

const identifier = /^[a-z_][a-z0-9_]*$/;

/** The tables of one journal: quoted names, ready for SQL. */
export interface JournalTables {
  readonly schema: string;
  readonly runs: string;
  readonly entries: string;
  /** The snapshots resumed, one row each: what makes a second resume of one snapshot fail. */
  readonly resumed: string;
  /** The name of the index of ended runs (unqualified, as CREATE INDEX takes it). */
  readonly endedIndex: string;
}

/** The tables for `schema` and `tablePrefix`, each checked: lower-case letters, digits and `_`, not starting with a digit. */
export function tablesOf(schema: unknown, tablePrefix: unknown): JournalTables {
  if (typeof schema !== 'string' || !identifier.test(schema)) {
    throw new ConfigError('schema', `schema must be a PostgreSQL name of lower-case letters, digits and _ (not starting with a digit), got ${describeValue(schema)}`);
  }
  if (typeof tablePrefix !== 'string' || (tablePrefix !== '' && !identifier.test(tablePrefix))) {
    throw new ConfigError('tablePrefix', `tablePrefix must be lower-case letters, digits and _ (not starting with a digit), got ${describeValue(tablePrefix)}`);
  }
  return {
    schema: `"${schema}"`,
    runs: `"${schema}"."${tablePrefix}runs"`,
    entries: `"${schema}"."${tablePrefix}entries"`,
    resumed: `"${schema}"."${tablePrefix}resumed"`,
    endedIndex: `"${tablePrefix}entries_ended"`,
  };
}

/** The statements that create the schema (idempotent), run in one transaction under an advisory lock. */
export function createStatements(t: JournalTables): readonly string[] {
  return [
    `CREATE SCHEMA IF NOT EXISTS ${t.schema}`,
    `CREATE TABLE IF NOT EXISTS ${t.runs} (
      run_id text PRIMARY KEY,
      agent text NOT NULL,
      tenant text NOT NULL,
      owner text NOT NULL,
      lease_until timestamptz NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now()
    )`,
    `CREATE TABLE IF NOT EXISTS ${t.entries} (
      run_id text NOT NULL,
      seq integer NOT NULL,
      ended boolean NOT NULL,
      body json NOT NULL,
      written_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (run_id, seq)
    )`,
    `CREATE INDEX IF NOT EXISTS ${t.endedIndex} ON ${t.entries} (run_id) WHERE ended`,
    `CREATE TABLE IF NOT EXISTS ${t.resumed} (
      digest text PRIMARY KEY,
      run_id text NOT NULL,
      resumed_at timestamptz NOT NULL DEFAULT now()
    )`,
  ];
}

/** The statements that drop the journal's tables (not its schema). */
export function dropStatements(t: JournalTables): readonly string[] {
  return [`DROP TABLE IF EXISTS ${t.entries}`, `DROP TABLE IF EXISTS ${t.runs}`, `DROP TABLE IF EXISTS ${t.resumed}`];
}

/**
 * One flush as one statement: the runs that began in it get their lease row ($1 owner, $2 lease
 * seconds, $3..$5 run, agent, tenant), and each run its row of entries ($6: a JSON array of
 * `{ r: run, s: the place of its last entry, e: whether it ended, b: its entries }`). One JSON
 * text rather than arrays of text: the entries are sent as they are, not escaped as array
 * elements, and the statement's text is the same whatever the flush's size.
 */
export function flushStatement(t: JournalTables): string {
  return `WITH began AS (
    INSERT INTO ${t.runs} (run_id, agent, tenant, owner, lease_until)
    SELECT r, a, n, $1, now() + make_interval(secs => $2) FROM unnest($3::text[], $4::text[], $5::text[]) AS x(r, a, n)
    ON CONFLICT (run_id) DO NOTHING
  )
  INSERT INTO ${t.entries} (run_id, seq, ended, body)
  SELECT x->>'r', (x->>'s')::int, (x->>'e')::bool, x->'b' FROM json_array_elements($6::json) AS x`;
}

/** A run's rows of entries in order ($1 run). */
export function readStatement(t: JournalTables): string {
  return `SELECT body FROM ${t.entries} WHERE run_id = $1 ORDER BY seq`;
}

/**
 * Takes over run $1 for owner $2 (lease $3 seconds) if its lease lapsed and it has not ended;
 * returns the place of its next entry. A row lock: of two claims at once, the second sees the
 * first's fresh lease and takes nothing.
 */
export function claimStatement(t: JournalTables): string {
  return `UPDATE ${t.runs} SET owner = $2, lease_until = now() + make_interval(secs => $3)
    WHERE run_id = $1 AND lease_until < now()
      AND NOT EXISTS (SELECT 1 FROM ${t.entries} WHERE run_id = $1 AND ended)
    RETURNING (SELECT coalesce(max(seq) + 1, 0) FROM ${t.entries} WHERE run_id = $1) AS next`;
}

/**
 * Takes snapshot $2 of run $1 for owner $3 (lease $4 seconds), once: a row in `resumed` (of two
 * takers at once, the second waits for the first's row and inserts nothing), the run's lease, its
 * `ended` rows marked as no longer its end, and its `resumed` entry $5 written as its next row;
 * returns the place of the entry after it. No row for a snapshot taken before or a run unknown.
 */
export function resumeStatement(t: JournalTables): string {
  return `WITH taken AS (
    INSERT INTO ${t.resumed} (digest, run_id) SELECT $2, $1 WHERE EXISTS (SELECT 1 FROM ${t.runs} WHERE run_id = $1)
    ON CONFLICT (digest) DO NOTHING RETURNING run_id
  ), leased AS (
    UPDATE ${t.runs} SET owner = $3, lease_until = now() + make_interval(secs => $4) WHERE run_id IN (SELECT run_id FROM taken)
  ), reopened AS (
    UPDATE ${t.entries} SET ended = false WHERE run_id IN (SELECT run_id FROM taken) AND ended
  )
  INSERT INTO ${t.entries} (run_id, seq, ended, body)
  SELECT run_id, (SELECT coalesce(max(seq) + 1, 0) FROM ${t.entries} WHERE run_id = $1), false, json_build_array($5::json) FROM taken
  RETURNING seq + 1 AS next`;
}

/** Renews owner $1's lease ($2 seconds) on the runs $3 it still runs. */
export function renewStatement(t: JournalTables): string {
  return `UPDATE ${t.runs} SET lease_until = now() + make_interval(secs => $2) WHERE owner = $1 AND run_id = ANY($3::text[])`;
}

/** Ends owner $1's lease on runs $2 at once (the journal closed: nobody runs them any more). */
export function releaseStatement(t: JournalTables): string {
  return `UPDATE ${t.runs} SET lease_until = now() WHERE owner = $1 AND run_id = ANY($2::text[])`;
}

/** The runs whose lease lapsed and that have not ended. */
export function recoverableStatement(t: JournalTables): string {
  return `SELECT run_id, agent, tenant, owner, lease_until FROM ${t.runs} r
    WHERE lease_until < now() AND NOT EXISTS (SELECT 1 FROM ${t.entries} e WHERE e.run_id = r.run_id AND e.ended)
    ORDER BY started_at`;
}

/** The snapshot store's table: a quoted name, ready for SQL, and its expiry index's. */
export interface SnapshotTable {
  readonly schema: string;
  readonly table: string;
  /** The name of the index on expiry (unqualified, as CREATE INDEX takes it). */
  readonly expiryIndex: string;
}

/** The snapshot store's table for `schema` and `tablePrefix`, checked as the journal's are. */
export function snapshotTableOf(schema: unknown, tablePrefix: unknown): SnapshotTable {
  const { schema: quoted } = tablesOf(schema, tablePrefix);
  return { schema: quoted, table: `${quoted}."${String(tablePrefix)}snapshots"`, expiryIndex: `"${String(tablePrefix)}snapshots_expiry"` };
}

/** The statements that create the snapshot store's schema and table (idempotent). */
export function snapshotCreateStatements(t: SnapshotTable): readonly string[] {
  return [
    `CREATE SCHEMA IF NOT EXISTS ${t.schema}`,
    `CREATE TABLE IF NOT EXISTS ${t.table} (
      key text PRIMARY KEY,
      tenant text NOT NULL,
      snapshot json NOT NULL,
      expires_at timestamptz NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS ${t.expiryIndex} ON ${t.table} (expires_at)`,
  ];
}

/**
 * Keeps snapshot $3 of tenant $2 under key $1 for $4 seconds (a key put again is replaced), and
 * sweeps the entries that expired, in the same statement (another key's: a statement changes a
 * row once).
 */
export function snapshotPutStatement(t: SnapshotTable): string {
  return `WITH swept AS (DELETE FROM ${t.table} WHERE expires_at <= now() AND key <> $1)
  INSERT INTO ${t.table} (key, tenant, snapshot, expires_at) VALUES ($1, $2, $3::json, now() + make_interval(secs => $4))
  ON CONFLICT (key) DO UPDATE SET tenant = excluded.tenant, snapshot = excluded.snapshot, expires_at = excluded.expires_at`;
}

/** The entry of key $1, unless it expired. */
export function snapshotGetStatement(t: SnapshotTable): string {
  return `SELECT tenant, snapshot FROM ${t.table} WHERE key = $1 AND expires_at > now()`;
}

/** Takes the entry of key $1 out, unless it expired: a row returned for the one caller that took it (a row lock: of two at once, the second finds nothing). */
export function snapshotDeleteStatement(t: SnapshotTable): string {
  return `DELETE FROM ${t.table} WHERE key = $1 AND expires_at > now() RETURNING 1 AS taken`;
}
