// The worked example's text timeline (examples/tool_concurrency.ts): every mark it can print,
// and every outcome it names after a bar, is explained by the legend printed above the
// scenarios. Fed activity by hand, so every kind of row appears: no clock.
import { expect } from 'chai';
import type { RunnerActivity } from '../../lib/index.js';
import { LEGEND, MS_PER_COLUMN, timeline } from '../../examples/tool_concurrency.js';

const call = (callId: string, index: number, tool = 'lookup') => ({ runId: 'r1', turn: 1, callId, tool, index });
const at = (columns: number) => columns * MS_PER_COLUMN;

// c1 runs at once; c2 waits on the turn lane; c3 is held behind an earlier phase, then runs;
// c4 is stopped in flight and its body overruns; c5 is stopped while still queued.
const activity: RunnerActivity[] = [
  { type: 'run-started', runId: 'r1', agent: 'planner', tenant: 'acme', at: 0 },
  { type: 'started', ...call('c1', 0), at: at(0) },
  { type: 'queued', ...call('c2', 1), lane: 'turn', at: at(0) },
  { type: 'ended', ...call('c1', 0), outcome: 'result', overrun: false, at: at(3) },
  { type: 'settled', ...call('c1', 0), outcome: 'result', at: at(3) },
  { type: 'started', ...call('c2', 1), at: at(3) },
  { type: 'ended', ...call('c2', 1), outcome: 'error', overrun: false, at: at(5) },
  { type: 'settled', ...call('c2', 1), outcome: 'error', at: at(5) },
  { type: 'started', ...call('c3', 2, 'booking'), at: at(5) },
  { type: 'queued', ...call('c5', 4), lane: 'tool:lookup', at: at(5) },
  { type: 'ended', ...call('c3', 2, 'booking'), outcome: 'result', overrun: false, at: at(7) },
  { type: 'settled', ...call('c3', 2, 'booking'), outcome: 'result', at: at(7) },
  { type: 'started', ...call('c4', 3, 'booking'), at: at(7) },
  { type: 'ended', ...call('c4', 3, 'booking'), outcome: 'indeterminate', overrun: true, at: at(9) },
  { type: 'ended', ...call('c5', 4), outcome: 'error', overrun: false, at: at(9) },
  { type: 'settled', ...call('c4', 3, 'booking'), outcome: 'indeterminate', at: at(9) },
  { type: 'settled', ...call('c5', 4), outcome: 'error', at: at(9) },
  { type: 'released', ...call('c4', 3, 'booking'), abandoned: false, at: at(12) },
  { type: 'run-ended', runId: 'r1', status: 'cancelled', at: at(12) },
];

describe('the worked example timeline', () => {
  const lines = timeline(activity, 0);

  it('draws a wait, a run, a late start and an overrun as marks on one time axis', () => {
    expect(lines).to.deep.equal([
      `    c1 lookup      |###${' '.repeat(29)}| result`,
      `    c2 lookup      |...##${' '.repeat(27)}| error`,
      `    c3 booking     |     ##${' '.repeat(25)}| result`,
      `    c5 lookup      |     ....${' '.repeat(23)}| error`,
      `    c4 booking     |       ##~~~${' '.repeat(20)}| indeterminate`,
    ]);
  });

  it('explains in its legend every mark a row holds and every outcome named after a bar', () => {
    const explained = new Set(LEGEND.map(([mark]) => mark));
    for (const line of lines) {
      const [, bar, outcome] = /^ {4}\S+ \S+ +\|(.*)\| (\S*)$/.exec(line) ?? [];
      expect(bar, line).to.be.a('string');
      for (const mark of new Set(`|${bar}`)) expect(explained.has(mark), `mark "${mark}" in ${line}`).to.equal(true);
      expect(explained.has(outcome!), `outcome "${outcome}"`).to.equal(true);
    }
  });

  it('explains no mark a row cannot hold', () => {
    const used = new Set(lines.flatMap((line) => [...line.slice(line.indexOf('|'), line.lastIndexOf('|') + 1)]));
    const outcomes = new Set(lines.map((line) => line.slice(line.lastIndexOf('| ') + 2)));
    for (const [mark] of LEGEND) expect(used.has(mark) || outcomes.has(mark), `legend entry "${mark}"`).to.equal(true);
  });
});
