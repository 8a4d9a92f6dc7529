// Kept shapes (lib/shapes.ts) are kept only when an application asks (`keepWarmShapes`): then
// every exemplar is made, once, and they hold nothing a process would notice: no timer left
// running, no asynchronous context left on, no call's data. That importing keeps none is
// spec/package/importsNothing.spec.ts.
import { execFile } from 'node:child_process';
import { expect } from 'chai';
import { keptShapes, keepShape, shapesNotKept } from '../lib/shapes.js';
import { AgentRunner, ScriptedProvider, ToolRegistry, Agent, keepWarmShapes } from '../lib/index.js';

// Imports the library in a fresh process, asks for the kept shapes (twice), and prints how many
// were kept before and after, what the process then holds open, and what a Promise made
// afterwards carries.
const script = `
const { keepWarmShapes } = await import(${JSON.stringify(new URL('../lib/index.ts', import.meta.url).href)});
const { keptShapes, shapesNotKept } = await import(${JSON.stringify(new URL('../lib/shapes.ts', import.meta.url).href)});
const before = keptShapes();
keepWarmShapes();
const once = keptShapes();
keepWarmShapes();
// A storage left on would carry its context onto every Promise made from now on.
const symbols = Object.getOwnPropertySymbols(Promise.resolve()).map(String);
console.log(JSON.stringify({ before, once, twice: keptShapes(), failed: shapesNotKept(), resources: process.getActiveResourcesInfo(), symbols }));
`;

interface Kept {
  readonly before: number;
  readonly once: number;
  readonly twice: number;
  readonly failed: readonly string[];
  readonly resources: readonly string[];
  readonly symbols: readonly string[];
}

function keptInAFreshProcess(): Promise<Kept> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Kept),
    ),
  );
}

describe('kept shapes (keepWarmShapes)', () => {
  it('are none until asked for; then every one is made (no constructor threw), once: asking again keeps no more; and they leave no timer running and no asynchronous context on', async function () {
    this.timeout(60_000);
    const kept = await keptInAFreshProcess();
    expect(kept.before).to.equal(0);
    expect(kept.failed).to.deep.equal([]);
    expect(kept.once).to.be.greaterThan(20);
    expect(kept.twice).to.equal(kept.once);
    expect(kept.resources.filter((kind) => kind === 'Timeout' || kind === 'Immediate')).to.deep.equal([]);
    expect(kept.symbols.filter((name) => name.includes('kResourceStore'))).to.deep.equal([]);
  });

  it('leave out an exemplar whose constructor throws, naming it, and never throw themselves', () => {
    const before = keptShapes();
    expect(() =>
      keepShape(() => {
        throw new TypeError('inert arguments no longer enough');
      }),
    ).not.to.throw();
    expect(keptShapes()).to.equal(before);
    expect(shapesNotKept().at(-1)).to.equal('TypeError: inert arguments no longer enough');
    (shapesNotKept() as string[]).pop();
  });

  it('do not change what a run does: a run after keepWarmShapes completes with its calls in order', async () => {
    keepWarmShapes();
    const tools = new ToolRegistry().register({ name: 'echo' }, async (args) => args);
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'a', name: 'echo', arguments: { n: 1 } }, { id: 'b', name: 'echo', arguments: { n: 2 } }] }, { text: 'done' }]);
    const result = await new AgentRunner({ provider, tools }).run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go');
    expect(result.status).to.equal('completed');
    expect(result.events.filter((e) => e.type === 'TOOL_RESULT').map((e) => (e.type === 'TOOL_RESULT' ? e.callId : ''))).to.deep.equal(['a', 'b']);
  });
});
