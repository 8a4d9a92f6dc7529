// agent-lanes/openai-agents: the OpenAI Agents SDK's function tools inside the lanes, its Runner
// kept (docs/openai-agents.md). Tools are read by their shape: this entry imports nothing of the SDK.
export { laneContextOf, withLanes, type AgentsCallDetails, type AgentsToolLike, type WithLanesOptions } from './frameworks/openaiAgentsLanes.js';
