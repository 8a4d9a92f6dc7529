// The frameworks bench's apps with lanes: each framework's tools wrapped by its own `withLanes`,
// one request scope per user request, for the request's tenant. The partner lookup is idempotent
// (a stopped one is safe to ask again). Beside them, the floor: what any wrapper that can stop one
// call alone pays in each framework, with no lane at all.
import type { ToolLanes } from '../../lib/index.js';
import { withLanes as withAiSdkLanes } from '../../lib/providers/aiSdkProvider.js';
import { withLanes as withLangChainLanes } from '../../lib/langchain.js';
import { withLanes as withAgentsLanes } from '../../lib/openaiAgents.js';
import type { FrameworkTools, Wraps } from './apps.js';

const idempotent = { partner_lookup: true };

/** The wraps that put `toolLanes` around each framework's tools. */
export function lanesWraps(toolLanes: ToolLanes): Wraps {
  return {
    'ai-sdk': (tools, tenant, signal) => withAiSdkLanes(tools, toolLanes, { tenant, idempotent, ...(signal ? { signal } : {}) }),
    'openai-agents': (tools, tenant, signal) => withAgentsLanes(tools, toolLanes, { tenant, idempotent, ...(signal ? { signal } : {}) }),
    langchain: (tools, tenant, signal) => withLangChainLanes(tools, toolLanes, { tenant, idempotent, ...(signal ? { signal } : {}) }),
  };
}

type AiSdkExecute = (input: unknown, options: { readonly abortSignal?: AbortSignal }) => unknown;
type AgentsTool = FrameworkTools['openai-agents'][number];
type AgentsInvoke = (runContext: unknown, input: string, details?: { readonly signal?: AbortSignal }) => Promise<unknown>;
type LangChainInvoke = (input: unknown, config?: { readonly signal?: AbortSignal }) => Promise<unknown>;

/**
 * The floor: each call gets an AbortController of its own, whose signal the tool is handed in
 * place of the framework's (a lane that stops one call alone, at its ceiling or on a lost lease,
 * aborts that signal), and one Promise step. No lane, no bound, no listener on the framework's
 * signal: a lower cost than any real per-call stop, so a fair floor under withLanes.
 */
export const floorWraps: Wraps = {
  'ai-sdk': (tools) => {
    const wrapped: FrameworkTools['ai-sdk'] = {};
    for (const [name, tool] of Object.entries(tools)) {
      const execute = tool.execute as AiSdkExecute;
      wrapped[name] = { ...tool, execute: (input: unknown, options: { readonly abortSignal?: AbortSignal }) => Promise.resolve(execute(input, { ...options, abortSignal: new AbortController().signal })) } as typeof tool;
    }
    return wrapped;
  },
  'openai-agents': (tools) =>
    tools.map((tool): AgentsTool => {
      if (tool.type !== 'function') return tool;
      const invoke = tool.invoke as AgentsInvoke;
      return { ...tool, invoke: (runContext: unknown, input: string, details?: { readonly signal?: AbortSignal }) => invoke(runContext, input, { ...details, signal: new AbortController().signal }).then((value) => value) } as AgentsTool;
    }),
  langchain: (tools) =>
    tools.map((tool) => {
      const invoke = tool.invoke.bind(tool) as LangChainInvoke;
      return Object.create(tool, { invoke: { value: (input: unknown, config?: { readonly signal?: AbortSignal }) => invoke(input, { ...config, signal: new AbortController().signal }).then((value) => value) } }) as typeof tool;
    }),
};
