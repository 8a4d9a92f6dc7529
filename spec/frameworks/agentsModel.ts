// A scripted model for the OpenAI Agents SDK's Runner, with no network: each turn's answer is a
// function of the request (what the model was sent), and every request is kept, so a spec reads
// what the model was told about each call.
import { Usage, type AgentInputItem, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';

export type AgentsTurn = (request: ModelRequest) => ModelResponse;

export class ScriptedAgentsModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly script: readonly AgentsTurn[]) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const turn = this.script[this.requests.length];
    this.requests.push(request);
    if (turn === undefined) throw new Error(`the script has no turn ${this.requests.length}`);
    return turn(request);
  }

  // The Runner's run() (not streamed) never asks for this.
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('ScriptedAgentsModel does not stream');
  }
}

/** A turn that asks for `calls` (tool name, call id, arguments) at once. */
export function callsTurn(calls: ReadonlyArray<readonly [string, string, unknown]>): AgentsTurn {
  return () => ({
    usage: new Usage(),
    output: calls.map(([name, callId, args]) => ({ type: 'function_call' as const, callId, name, arguments: JSON.stringify(args), status: 'completed' as const })),
  });
}

/** A turn that answers with text. */
export function textTurn(text: string): AgentsTurn {
  return () => ({ usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] }] });
}

/** What the model was told of each call, by call id: the text of its function_call_result. */
export function resultsSeen(input: string | AgentInputItem[]): Record<string, string> {
  const seen: Record<string, string> = {};
  if (typeof input === 'string') return seen;
  for (const item of input) {
    if (item.type !== 'function_call_result') continue;
    const { output } = item;
    seen[item.callId] = typeof output === 'string' ? output : !Array.isArray(output) && output.type === 'text' ? output.text : JSON.stringify(output);
  }
  return seen;
}
