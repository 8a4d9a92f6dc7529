// A hotel partner as an MCP server (the SDK's McpServer over stdio), for examples/mcp/run.ts:
// a read-only search that takes 100 ms and counts how many searches it has running at once,
// a booking that says it is destructive, and a preference that is set the same way each time.
// Plain JavaScript, so `node examples/mcp/server.mjs` starts it.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'hotels', version: '1.0.0' });
// Searches running now, and the most that ever ran at once (as this server sees them).
let running = 0;
let peak = 0;

server.registerTool(
  'search_hotels',
  { description: 'Hotels in a city with rooms free', inputSchema: { city: z.string().describe('City name') }, annotations: { readOnlyHint: true } },
  async ({ city }, extra) => {
    running++;
    peak = Math.max(peak, running);
    try {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, 100);
        extra.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
      return { content: [{ type: 'text', text: `3 hotels in ${city}` }] };
    } finally {
      running--;
    }
  },
);
server.registerTool(
  'book_room',
  { description: 'Books a room', inputSchema: { hotel: z.string(), nights: z.number().int().min(1) }, annotations: { destructiveHint: true } },
  async ({ hotel, nights }) => ({ content: [{ type: 'text', text: `booked ${nights} nights at ${hotel}` }], structuredContent: { hotel, nights, confirmation: 'H-1042' } }),
);
server.registerTool(
  'set_preference',
  { description: 'Remembers a preference', inputSchema: { key: z.string(), value: z.string() }, annotations: { destructiveHint: true, idempotentHint: true } },
  async ({ key, value }) => ({ content: [{ type: 'text', text: `${key} = ${value}` }] }),
);
server.registerTool('peak_searches', { description: 'The most searches that ran at once', inputSchema: {}, annotations: { readOnlyHint: true } }, async () => ({
  content: [{ type: 'text', text: String(peak) }],
}));

await server.connect(new StdioServerTransport());
