// An McpServer of a spec's own, connected to a Client over the SDK's in-memory transport: no
// sockets, no child process, so a spec can drive it on fake timers. `close()` ends both sides.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';

export interface InMemory {
  readonly client: Client;
  close(): Promise<void>;
}

export async function inMemory(server: McpServer): Promise<InMemory> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'agent-lanes-spec', version: '1.0.0' });
  await client.connect(clientSide);
  return {
    client,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

/** Resolves once `test` holds, checking every few ms; fails after `ms`. */
export async function until(test: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > end) throw new Error('the condition did not hold in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
