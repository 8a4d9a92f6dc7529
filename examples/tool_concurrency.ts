// The worked example: five scenarios from the product brief, each run through a real
// AgentRunner against a scripted model (no network, no keys). For each it prints what
// the model got back, a timeline of when each call ran, and the wall time against one
// lookup.  Run it with `npm run example`.
import { pathToFileURL } from 'node:url';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, type RunnerActivity } from '../lib/index.js';
import { LOOKUP_MS, scenarios, tools, type Scenario } from './scenarios.js';

/** One column of the timeline. */
export const MS_PER_COLUMN = 20;

/** Every mark a timeline row can hold, and what it means; printed once, above the scenarios. */
export const LEGEND: ReadonlyArray<readonly [mark: string, meaning: string]> = [
  ['|', `the edges of the timeline, which starts when the run starts; one column = ${MS_PER_COLUMN}ms`],
  [' ', 'before the call waited or ran (the model had not answered yet, or the gate or an earlier phase held it), and after it'],
  ['.', 'queued: waiting for a permit of a lane (the turn, its tool, its tenant)'],
  ['#', 'running: every lane granted, the body at work, until the call ended'],
  ['~', "overrun: the call ended (stopped, or past its ceiling) but its body still runs and keeps its permits"],
  ['result', 'after the bar: the call answered (TOOL_RESULT)'],
  ['error', 'after the bar: the call failed or timed out, or was stopped before it went out, or in flight with its tool idempotent (TOOL_ERROR)'],
  ['indeterminate', 'after the bar: the call was stopped in flight and its side effect may have landed (TOOL_INDETERMINATE)'],
];

interface Row {
  tool: string;
  queued?: number;
  started?: number;
  ended?: number;
  released?: number;
  outcome?: string;
}

/** One line per call: its wait, its run and any overrun as marks on a shared time axis, then its outcome. */
export function timeline(activity: readonly RunnerActivity[], origin: number): string[] {
  const rows = new Map<string, Row>();
  for (const a of activity) {
    if (a.type === 'run-started' || a.type === 'run-ended' || a.type === 'text-delta' || a.type === 'lane-store' || a.type === 'lane-paused' || a.type === 'lane-limit' || a.type === 'tracing-failed') continue;
    const row = rows.get(a.callId) ?? { tool: a.tool };
    // The first queued entry is when the call began to wait (it may wait on several lanes in turn).
    if (a.type === 'queued') row.queued ??= a.at - origin;
    if (a.type === 'started') row.started = a.at - origin;
    // The bar ends when the call ended; an overrun runs on until its body gave the permits back.
    if (a.type === 'ended') row.ended = a.at - origin;
    if (a.type === 'released') row.released = a.at - origin;
    // The outcome is the one the transcript has, after the settle steps.
    if (a.type === 'settled') {
      row.ended ??= a.at - origin;
      row.outcome = a.outcome;
    }
    rows.set(a.callId, row);
  }
  const column = (ms: number) => Math.round(ms / MS_PER_COLUMN);
  return [...rows].map(([callId, row]) => {
    const start = column(row.started ?? row.ended ?? 0);
    const end = Math.max(column(row.ended ?? 0), start + (row.started === undefined ? 0 : 1));
    const wait = row.queued === undefined ? 0 : Math.max(0, start - column(row.queued));
    const overrun = row.released === undefined ? 0 : Math.max(0, column(row.released) - end);
    const bar = ' '.repeat(start - wait) + '.'.repeat(wait) + '#'.repeat(end - start) + '~'.repeat(overrun);
    return `    ${callId} ${row.tool.padEnd(11)} |${bar.padEnd(32)}| ${row.outcome ?? ''}`;
  });
}

async function play(scenario: Scenario, index: number): Promise<void> {
  const provider = new ScriptedProvider([scenario.turn, (request) => ({ text: `Read ${request.messages.filter((m) => m.role === 'tool').length} tool results.` })]);
  const runner = new AgentRunner({ provider, tools, concurrency: scenario.runner ?? new ConcurrencyConfig({ maxConcurrentTools: 8 }) });
  const agent = new Agent({ name: 'planner', instructions: 'Find and book a hotel.', model: 'scripted', ...scenario.agent });
  const activity: RunnerActivity[] = [];
  const watching = runner.activity$.subscribe((a) => activity.push(a));
  const started = performance.now();
  const origin = Date.now();
  const result = await runner.run(agent, 'Where should I stay?', { tenant: 'acme' });
  const wall = performance.now() - started;
  watching.unsubscribe();

  console.log(`\n${index + 1}. ${scenario.title}`);
  console.log('  The model got back, in call order:');
  for (const message of provider.requests[1]?.messages.filter((m) => m.role === 'tool') ?? []) {
    console.log(`    ${message.toolCallId} ${message.isError ? 'ERROR ' : ''}${message.content}`);
  }
  console.log(`  When each call ran (one column = ${MS_PER_COLUMN}ms; the marks are explained at the top):`);
  for (const line of timeline(activity, origin)) console.log(line);
  console.log(`  Wall time ${Math.round(wall)}ms = ${(wall / LOOKUP_MS).toFixed(2)} x one lookup (${LOOKUP_MS}ms); run ${result.status}.`);
}

// `npm run example`: every scenario in turn. Imported (by its spec), it only exports the timeline.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log('agent-lanes: a turn of several tool calls, run inside declared lanes.');
  console.log('\nHow to read the timelines, one row per call:');
  for (const [mark, meaning] of LEGEND) console.log(`  ${(mark.length === 1 ? `"${mark}"` : mark).padEnd(15)}${meaning}`);
  for (const [index, scenario] of scenarios.entries()) await play(scenario, index);
}
