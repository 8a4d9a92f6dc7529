// Following an MCP server's list of tools: on `notifications/tools/list_changed` the server's
// tools are listed again and the registry is brought in line: a new tool registered (a runner
// shows it to the model from its next turn), a removed one taken out (a later call fails alone,
// saying so), a changed one registered anew under the same name.
import { jsonText } from '../json.js';
import { chosenOf, listAll, toolOf, type McpServerTools, type McpToolInfo } from './mcp.js';
import { namesOf } from './mcpNames.js';
import type { ToolRegistry } from './ToolRegistry.js';

const LIST_CHANGED = 'notifications/tools/list_changed';

/**
 * Keeps `registry` in line with the server's list from now on. The notification is heard through
 * the client's `fallbackNotificationHandler` (chained: one set before is still called, first), so
 * a Client that handles the notification itself (its own `listChanged.tools` option) is not followed.
 */
export function followToolList(registry: ToolRegistry, served: McpServerTools): void {
  const { client } = served;
  // The server's tools as registered here, by the server's name.
  const current = new Map<string, { readonly name: string; readonly form: string }>();
  for (const tool of served.tools) current.set(tool.listed.name, { name: tool.declaration.name, form: formOf(tool.listed) });
  // A listing under way, and whether another notification came meanwhile.
  let listing: Promise<void> | undefined;
  let again = false;

  const refresh = async (): Promise<void> => {
    const listed = chosenOf(await listAll(client), served.settings);
    const seen = new Set(listed.map((tool) => tool.name));
    for (const [listedName, { name }] of current) {
      if (seen.has(listedName)) continue;
      const why = `MCP server ${served.server} no longer lists it`;
      current.delete(listedName);
      served.link.withdraw(listedName, why);
      registry.unregister(name, why);
    }
    // A new tool takes no name already in use here, of this server's or any other tool's.
    const fresh = listed.filter((tool) => !current.has(tool.name));
    const names = namesOf(fresh.map((tool) => tool.name), served.settings.prefix, new Set(registry.names));
    for (const tool of listed) {
      const form = formOf(tool);
      const known = current.get(tool.name);
      if (known !== undefined && known.form === form) continue;
      const name = known?.name ?? names.get(tool.name)!;
      try {
        const made = toolOf(tool, name, served.link, served.lane, served.settings);
        if (known !== undefined) registry.unregister(name, `MCP server ${served.server} changed it`);
        registry.register(made.declaration, made.body);
        served.link.restore(tool.name);
        current.set(tool.name, { name, form });
      } catch (error) {
        // One tool the registry cannot take (its schema is not an object schema) is left out, said to the client's onerror.
        client.onerror?.(new Error(`MCP server ${served.server}'s tool ${JSON.stringify(tool.name)} was left out: ${(error as Error).message}`));
      }
    }
  };

  const changed = (): void => {
    if (listing !== undefined) {
      again = true;
      return;
    }
    listing = refresh()
      .catch((error: unknown) => {
        // The tools stay as they were; the client's onerror hears why.
        client.onerror?.(new Error(`the tools of MCP server ${served.server} could not be listed again: ${error instanceof Error ? error.message : String(error)}`));
      })
      .finally(() => {
        listing = undefined;
        if (again) {
          again = false;
          changed();
        }
      });
  };

  const before = client.fallbackNotificationHandler;
  client.fallbackNotificationHandler = async (notification) => {
    if (notification.method === LIST_CHANGED) changed();
    if (before !== undefined) await before.call(client, notification);
  };
}

// What of a listed tool makes its declaration: a change to any of it registers the tool anew.
function formOf(tool: McpToolInfo): string {
  try {
    return jsonText({ title: tool.title, description: tool.description, inputSchema: tool.inputSchema, annotations: tool.annotations });
  } catch {
    // Unreadable: toolOf refuses it too, so it is never registered under this form.
    return '\u0000unreadable';
  }
}
