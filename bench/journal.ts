// The run journal's cost: W2 (one turn of N calls answering at once, per-call overhead) and W3
// (500 runs x 4 calls of 1 ms, calls per second) on PostgreSQL (127.0.0.1:5432, database test),
// beside the same without a journal and the in-memory journal, and the floors: PostgreSQL round
// trips per second measured alone, and one flush statement of as many rows as W3 writes.
// Figures, not pass/fail. Tables under a prefix of this run's own, dropped after.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  InMemoryRunJournal,
  ScriptedProvider,
  ToolRegistry,
  type ModelResponse,
  type RunJournal,
} from '../lib/index.js';
import { PostgresRunJournal } from '../lib/postgres.js';
import type { Row } from './row.js';

const connectionString = process.env['AGENT_LANES_PG'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const prefix = `bench_${process.pid}_${randomBytes(3).toString('hex')}_`;
const everything = new ConcurrencyConfig({ maxConcurrentTools: 1_000_000, perTool: { work: 1_000_000 }, perTenant: 1_000_000, perToolSeconds: { work: 60 } });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const turnOf = (n: number): ModelResponse => ({ toolCalls: Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: 'work', arguments: {} })) });

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function timed(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

async function medianOf(repeats: number, warmUps: number, run: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < warmUps; i++) await run();
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) times.push(await timed(run));
  return median(times);
}

// One run of one turn of n calls that answer at once, to its end.
async function oneTurn(n: number, journal: RunJournal | undefined): Promise<void> {
  const tools = new ToolRegistry().register({ name: 'work' }, () => Promise.resolve(1));
  const runner = new AgentRunner({ provider: new ScriptedProvider([turnOf(n), { text: 'done' }]), tools, concurrency: everything, ...(journal ? { journal } : {}) });
  const result = await runner.run(new Agent({ name: 'bench', instructions: '', model: 'scripted' }), 'go');
  if (result.status !== 'completed') throw new Error(`bench run ended ${result.status}`);
}

// W2's per-call overhead: a turn of n calls less an empty turn, per call.
async function perCall(n: number, journal: RunJournal | undefined): Promise<number> {
  const warm = Math.max(2, Math.ceil(20_000 / n));
  const full = await medianOf(5, warm, () => oneTurn(n, journal));
  const empty = await medianOf(5, 2, () => oneTurn(0, journal));
  return ((full - empty) * 1000) / n;
}

// A W3 round: 500 runs of one turn of 4 calls sleeping 1 ms, on one runner, all at once.
async function w3Round(journal: RunJournal | undefined): Promise<void> {
  const runs = 500;
  const script: Record<string, ModelResponse[]> = {};
  const agents = Array.from({ length: runs }, (_, i) => {
    script[`a${i}`] = [turnOf(4), { text: 'done' }];
    return new Agent({ name: `a${i}`, instructions: '', model: 'scripted' });
  });
  const tools = new ToolRegistry().register({ name: 'work' }, () => sleep(1));
  const runner = new AgentRunner({ provider: new ScriptedProvider(script), tools, concurrency: everything, ...(journal ? { journal } : {}) });
  const results = await Promise.all(agents.map((agent) => runner.run(agent, 'go')));
  if (results.some((r) => r.status !== 'completed')) throw new Error('a bench run did not complete');
}

export async function journalBench(row: (r: Row) => void, quick: boolean): Promise<void> {
  const pool = new pg.Pool({ connectionString, max: 4 });
  pool.on('error', () => undefined);
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    row({ workload: 'Journal', figure: 'PostgreSQL unreachable', value: 0, unit: '-', note: `skipped: ${(error as Error).message}` });
    await pool.end();
    return;
  }
  const postgres = new PostgresRunJournal({ pool, tablePrefix: prefix });
  await postgres.setup();
  const memory = new InMemoryRunJournal();
  const journals: ReadonlyArray<readonly [string, RunJournal | undefined]> = [
    ['no journal', undefined],
    ['in-memory journal', memory],
    ['PostgreSQL journal', postgres],
  ];
  try {
    for (const n of quick ? [1_000] : [1_000, 10_000]) {
      const none = await perCall(n, undefined);
      for (const [name, journal] of journals) {
        const value = journal === undefined ? none : await perCall(n, journal);
        row({ workload: `W2 journaled, N=${n}`, figure: `per call, ${name}`, value, unit: 'us/call', note: journal === undefined ? '' : `${(value / none).toFixed(1)}x no journal` });
      }
    }
    const wall: Record<string, number> = {};
    for (const [name, journal] of journals) {
      wall[name] = await medianOf(quick ? 3 : 7, quick ? 2 : 6, () => w3Round(journal));
      row({ workload: 'W3 journaled, 500 runs x 4 calls', figure: `calls per second, ${name}`, value: 2000 / (wall[name]! / 1000), unit: 'calls/s', note: name === 'PostgreSQL journal' ? 'target: at least 10,000' : '' });
    }
    // The floors: a round trip alone, one after another, and one flush of W3's 6,000 rows alone.
    const trips = 2000;
    const tripMs = await timed(async () => {
      for (let i = 0; i < trips; i++) await pool.query('SELECT 1');
    });
    row({ workload: 'Journal floor', figure: 'PostgreSQL round trips, one at a time', value: trips / (tripMs / 1000), unit: '/s' });
    const flushMs = await medianOf(5, 1, () => flushAlone(pool));
    row({ workload: 'Journal floor', figure: "W3's 6,000 entries in one statement", value: flushMs, unit: 'ms', note: `${((6000 / flushMs) * 1000).toFixed(0)} entries/s: W3 at most ${(2000 / (flushMs / 1000)).toFixed(0)} calls/s` });
  } finally {
    await postgres.close();
    await postgres.drop().catch(() => undefined);
    await memory.close();
    await pool.end();
  }
}

// What writing W3's entries costs PostgreSQL alone: its 6,000 entries as the journal writes them
// at best, 500 runs x 2 rows of 6 entries, in one INSERT.
async function flushAlone(pool: pg.Pool): Promise<void> {
  const rows = 1000;
  const base = (Date.now() % 1_000_000) * 10;
  const ids = Array.from({ length: rows }, (_, i) => `floor-${i % 500}`);
  const seqs = Array.from({ length: rows }, (_, i) => base + Math.floor(i / 500));
  const entry = JSON.stringify({ kind: 'settled', runId: 'floor', turn: 1, index: 0, outcome: { kind: 'result', index: 0, callId: 'c0', tool: 'work', dispatched: true, result: 1 }, content: '1' });
  const body = `[${Array.from({ length: 6 }, () => entry).join(',')}]`;
  await pool.query(
    `INSERT INTO "${prefix}entries" (run_id, seq, ended, body) SELECT r, s, false, b::json FROM unnest($1::text[], $2::int[], $3::text[]) AS x(r, s, b) ON CONFLICT DO NOTHING`,
    [ids, seqs, ids.map(() => body)],
  );
}
