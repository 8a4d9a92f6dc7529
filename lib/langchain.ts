// agent-lanes/langchain: LangChain tools inside the lanes, as ToolNode and createReactAgent run
// them (docs/langchain.md). Its peer is @langchain/core (ToolMessage, for a stopped call's answer,
// imported when one is needed).
export { laneContextOf, withLanes, type LangChainToolLike, type WithLanesOptions } from './frameworks/langchainLanes.js';
