// The objects the library keeps for their hidden classes (lib/shapes.ts) hold nothing a process
// would notice: no timer left running, no asynchronous context left on, no call's data.
import { execFile } from 'node:child_process';
import { expect } from 'chai';
import { keptShapes, keepShape, shapesNotKept } from '../lib/shapes.js';
import { AgentRunner, ScriptedProvider, ToolRegistry, Agent } from '../lib/index.js';

// Imports the library in a fresh process and prints what the process then holds open, and what
// a Promise made afterwards carries.
const script = `
await import(${JSON.stringify(new URL('../lib/index.ts', import.meta.url).href)});
// A storage left on would carry its context onto every Promise made from now on.
const symbols = Object.getOwnPropertySymbols(Promise.resolve()).map(String);
console.log(JSON.stringify({ resources: process.getActiveResourcesInfo(), symbols }));
`;

function imported(): Promise<{ resources: string[]; symbols: string[] }> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split('\n').pop()!) as { resources: string[]; symbols: string[] }),
    ),
  );
}

describe('kept shapes', () => {
  it('are made when the library is imported, every one of them (none of their constructors threw)', () => {
    expect(shapesNotKept()).to.deep.equal([]);
    expect(keptShapes()).to.be.greaterThan(10);
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

  it('leave no timer running and no asynchronous context on once the library is imported', async function () {
    this.timeout(60_000);
    const { resources, symbols } = await imported();
    expect(resources.filter((kind) => kind === 'Timeout' || kind === 'Immediate')).to.deep.equal([]);
    expect(symbols.filter((name) => name.includes('kResourceStore'))).to.deep.equal([]);
  });

  it('do not change what a run does: a run after import completes with its calls in order', async () => {
    const tools = new ToolRegistry().register({ name: 'echo' }, async (args) => args);
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'a', name: 'echo', arguments: { n: 1 } }, { id: 'b', name: 'echo', arguments: { n: 2 } }] }, { text: 'done' }]);
    const result = await new AgentRunner({ provider, tools }).run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go');
    expect(result.status).to.equal('completed');
    expect(result.events.filter((e) => e.type === 'TOOL_RESULT').map((e) => (e.type === 'TOOL_RESULT' ? e.callId : ''))).to.deep.equal(['a', 'b']);
  });
});
