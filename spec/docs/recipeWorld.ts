// What a runnable recipe of the docs finds around it when a spec runs it: the `runner` and
// `agent` its page speaks of (a model that asks for one lookup, then answers with what it
// found, saying how many messages it saw), and every server it starts listening on a free
// port of 127.0.0.1, announced on stdout as `listening <port>`.
import { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as t from 'io-ts';
import { Agent, AgentRunner, ToolRegistry, type ModelProvider } from '../../lib/index.js';

const provider: ModelProvider = {
  respond: async (request) => {
    const found = request.messages.find((message) => message.role === 'tool');
    if (found === undefined) return { toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"city":"Lisbon"}' }] };
    return { text: `Lisbon from ${found.content} (${request.messages.length} messages seen).` };
  },
};
const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }), idempotent: true }, ({ city }) => ({ city, from: 122 }));

Object.assign(globalThis, {
  runner: new AgentRunner({ provider, tools }),
  agent: new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'recipe-model' }),
});

const listen = Server.prototype.listen;
Server.prototype.listen = function (this: Server) {
  this.once('listening', () => console.log(`listening ${(this.address() as AddressInfo).port}`));
  return (listen as (port: number, host: string) => Server).call(this, 0, '127.0.0.1');
} as typeof Server.prototype.listen;
