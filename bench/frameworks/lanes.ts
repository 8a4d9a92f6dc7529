// The frameworks bench's apps with lanes: each framework's tools wrapped by its own `withLanes`,
// one request scope per user request, for the request's tenant. The partner lookup is idempotent
// (a stopped one is safe to ask again).
import type { ToolLanes } from '../../lib/index.js';
import { withLanes as withAiSdkLanes } from '../../lib/providers/aiSdkProvider.js';
import { withLanes as withLangChainLanes } from '../../lib/langchain.js';
import { withLanes as withAgentsLanes } from '../../lib/openaiAgents.js';
import type { Wraps } from './apps.js';

const idempotent = { partner_lookup: true };

/** The wraps that put `toolLanes` around each framework's tools. */
export function lanesWraps(toolLanes: ToolLanes): Wraps {
  return {
    'ai-sdk': (tools, tenant, signal) => withAiSdkLanes(tools, toolLanes, { tenant, idempotent, ...(signal ? { signal } : {}) }),
    'openai-agents': (tools, tenant, signal) => withAgentsLanes(tools, toolLanes, { tenant, idempotent, ...(signal ? { signal } : {}) }),
    langchain: (tools, tenant, signal) => withLangChainLanes(tools, toolLanes, { tenant, idempotent, ...(signal ? { signal } : {}) }),
  };
}
