// A freshly started worker for firstUse.spec.ts, with the runner's default loopStallMs. Turn one:
// `fetcher` makes the process's first `fetch` to a local server, on a machine whose load stands in
// as a busy-wait beside the first touch of `fetch` in the same stretch (so the one-time cost of
// loading Node's HTTP client takes well past the limit, as it does beside busy processes). Turns
// two and three: `blocker` holds the loop for 500 ms on every call. It prints each call's outcome.
import { createServer } from 'node:http';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type RunEvent } from '../../lib/index.js';

function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // holding the loop
  }
}

const server = createServer((_request, response) => response.end('ok'));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const address = server.address();
const url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}/`;

const tools = new ToolRegistry()
  .register({ name: 'fetcher' }, async () => {
    // First touch of fetch: Node loads its HTTP client now; the busy machine is the busy-wait.
    const first = globalThis.fetch;
    block(400);
    return (await first(url)).text();
  })
  .register({ name: 'blocker' }, () => {
    block(500);
    return 'done';
  });
const call = (id: string, name: string) => ({ toolCalls: [{ id, name, arguments: {} }] });
const runner = new AgentRunner({ provider: new ScriptedProvider([call('a', 'fetcher'), call('b', 'blocker'), call('c', 'blocker'), { text: 'end' }]), tools });
const result = await runner.run(new Agent({ name: 'worker', instructions: '', model: 'm' }), 'go');
for (const event of result.events as RunEvent[]) {
  if (event.type === 'TOOL_RESULT') console.log(`${event.tool} result ${JSON.stringify(event.result)}`);
  if (event.type === 'TOOL_ERROR') console.log(`${event.tool} error ${event.error.name}`);
}
server.close();
