export { ToolRegistry, type RegisteredTool, type ToolSpec } from './ToolRegistry.js';
export { resolveDeclaration, type ArgsOf, type ResolvedDeclaration, type ToolDeclaration, type ToolLane } from './ToolDeclaration.js';
export type { AgentRef, NestedRunResult, NestedRunUsage, RunState, ToolBody, ToolContext } from './ToolContext.js';
export { decodeArguments } from './decodeArguments.js';
export { frozenPlainCopy, frozenView, jsonLike, NotPlainDataError, ownCopy } from './plainData.js';
export { toJsonSchema, type JsonSchema } from './jsonSchema.js';
export { LoopMonitor, type Watch } from './loopMonitor.js';
export { WorkerPool, type WorkerPoolOptions } from './WorkerPool.js';
export { mcpTools, type McpClient, type McpRequestOptions, type McpTool, type McpToolAnnotations, type McpToolInfo, type McpToolOverride, type McpToolsOptions } from './mcp.js';
