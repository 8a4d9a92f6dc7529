// The worked example: five scenarios from the product brief, each run through a real
// AgentRunner against a scripted model (no network, no keys). For each it prints what
// the model got back, a timeline of when each call ran, and the wall time against one
// lookup.  Run it with `npm run example`.
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, type RunnerActivity } from '../lib/index.js';
import { LOOKUP_MS, scenarios, tools, type Scenario } from './scenarios.js';

/** One column of the timeline. */
const MS_PER_COLUMN = 20;

function timeline(activity: readonly RunnerActivity[], origin: number): string[] {
  const rows = new Map<string, { tool: string; queued?: number; started?: number; settled?: number; outcome?: string }>();
  for (const a of activity) {
    if (a.type === 'run-started' || a.type === 'run-ended' || a.type === 'lane-store') continue;
    const row = rows.get(a.callId) ?? { tool: a.tool };
    if (a.type === 'queued') row.queued = a.at - origin;
    if (a.type === 'started') row.started = a.at - origin;
    // The bar ends when the call ended; the outcome is the one the transcript has (settled).
    if (a.type === 'ended') row.settled = a.at - origin;
    if (a.type === 'settled') {
      row.settled ??= a.at - origin;
      row.outcome = a.outcome;
    }
    rows.set(a.callId, row);
  }
  const column = (ms: number) => Math.round(ms / MS_PER_COLUMN);
  return [...rows].map(([callId, row]) => {
    const start = column(row.started ?? row.settled ?? 0);
    const end = Math.max(column(row.settled ?? 0), start + (row.started === undefined ? 0 : 1));
    const wait = row.queued === undefined ? 0 : Math.max(0, start - column(row.queued));
    const bar = ' '.repeat(start - wait) + '.'.repeat(wait) + '#'.repeat(end - start);
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
  console.log(`  When each call ran (one column = ${MS_PER_COLUMN}ms, "." waiting for a lane, "#" running):`);
  for (const line of timeline(activity, origin)) console.log(line);
  console.log(`  Wall time ${Math.round(wall)}ms = ${(wall / LOOKUP_MS).toFixed(2)} x one lookup (${LOOKUP_MS}ms); run ${result.status}.`);
}

console.log('agent-lanes: a turn of several tool calls, run inside declared lanes.');
for (const [index, scenario] of scenarios.entries()) await play(scenario, index);
