// The registry a recorder or a replay runs (the same declarations, other bodies) keeps each
// tool's own lane, so a recorded or replayed run is bounded as the real one is.
import { expect } from 'chai';
import { CassetteRecorder } from '../../lib/testing.js';
import { ScriptedProvider, ToolRegistry } from '../../lib/index.js';

describe('the registry a recorder runs', () => {
  it("keeps a tool's own lane (an MCP server's), with its key and limit", () => {
    const tools = new ToolRegistry()
      .register({ name: 'search', lane: { key: 'mcp:files', limit: 2 } }, () => 'found')
      .register({ name: 'plain' }, () => 'ok');
    const recorder = new CassetteRecorder({ provider: new ScriptedProvider([{ text: 'done' }]), tools });
    expect(recorder.tools.get('search')!.declaration.lane).to.deep.equal({ key: 'mcp:files', limit: 2 });
    expect(recorder.tools.get('plain')!.declaration.lane).to.equal(undefined);
  });
});
