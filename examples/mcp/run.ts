// MCP tools in lanes: a hotel partner's MCP server (examples/mcp/server.mjs) started over stdio,
// its tools registered with registry.registerMcp, and a scripted model asking for six searches,
// a preference and a booking in one turn. The server's lane (perServer: 2) keeps its searches
// two at a time, as the server itself counts them; the booking (destructiveHint) runs in a phase
// of its own. No network, no keys. Run it with `npm run example:mcp`.
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ToolCall } from '../../lib/index.js';

const client = new Client({ name: 'planner', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command: process.execPath, args: [fileURLToPath(new URL('./server.mjs', import.meta.url))] }));

try {
  const tools = await new ToolRegistry().registerMcp(client, { perServer: 2, prefix: 'hotels_' });
  for (const name of tools.names) {
    const { parallelSafe, idempotent, lane } = tools.get(name)!.declaration;
    console.log(`${name.padEnd(22)} parallelSafe=${String(parallelSafe).padEnd(5)} idempotent=${String(idempotent).padEnd(5)} lane=${lane?.key}/${lane?.limit}`);
  }

  const cities = ['Lisbon', 'Porto', 'Faro', 'Braga', 'Coimbra', 'Evora'];
  const turn: ToolCall[] = [
    ...cities.map((city, i) => ({ id: `s${i + 1}`, name: 'hotels_search_hotels', arguments: { city } })),
    { id: 'p1', name: 'hotels_set_preference', arguments: { key: 'view', value: 'sea' } },
    { id: 'b1', name: 'hotels_book_room', arguments: { hotel: 'Casa do Mar', nights: 4 } },
  ];
  const provider = new ScriptedProvider([{ toolCalls: turn }, { text: 'Booked Casa do Mar for four nights.' }]);
  const runner = new AgentRunner({ provider, tools });
  const started = Date.now();
  const result = await runner.run(new Agent({ name: 'planner', instructions: 'Find and book a hotel.', model: 'scripted' }), 'Four nights by the sea');
  const wall = Date.now() - started;

  console.log(`\n${result.status} in ${wall} ms (six searches of 100 ms, two at a time: about 300 ms)`);
  for (const event of result.events) {
    if (event.type === 'TOOL_RESULT') console.log(`  ${event.callId} ${JSON.stringify(event.result)}`);
    if (event.type === 'TOOL_ERROR') console.log(`  ${event.callId} ${event.error.name}: ${event.error.message}`);
  }
  const peak = await client.callTool({ name: 'peak_searches', arguments: {} });
  console.log(`the server saw at most ${(peak.content as Array<{ text: string }>)[0]!.text} searches at once`);
} finally {
  await client.close();
}
