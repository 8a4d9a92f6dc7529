// agent-lanes/mcp: an MCP server's tools as the registry's tools (docs/mcp.md).
// `registry.registerMcp(client, options)` is the same on the ToolRegistry of the main entry.
export {
  mcpTools,
  type McpClient,
  type McpProgress,
  type McpRequestOptions,
  type McpTool,
  type McpToolAnnotations,
  type McpToolInfo,
  type McpToolOverride,
  type McpToolsOptions,
} from './tools/mcp.js';
export { metaKeys as mcpMetaKeys } from './tools/mcpLink.js';
export { McpConnectionLostError, McpToolError } from './errors.js';
