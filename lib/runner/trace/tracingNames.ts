// The names on the spans a runner with a tracer emits, apart from the tracing itself, so that an
// app without @opentelemetry/api can import them (and the library's declarations never name it).

/** The attribute and event names the spans carry: the GenAI conventions', then this library's own. */
export const TracingAttributes = {
  OPERATION: 'gen_ai.operation.name',
  /** Who serves the model (`openai`, `anthropic` ...), as the provider names itself; `_OTHER` when it does not. */
  PROVIDER_NAME: 'gen_ai.provider.name',
  AGENT_NAME: 'gen_ai.agent.name',
  REQUEST_MODEL: 'gen_ai.request.model',
  TOOL_NAME: 'gen_ai.tool.name',
  TOOL_CALL_ID: 'gen_ai.tool.call.id',
  TOOL_TYPE: 'gen_ai.tool.type',
  TOOL_DESCRIPTION: 'gen_ai.tool.description',
  /** The model that answered and the id of its response, as the wire (or the AI SDK) says them. */
  RESPONSE_MODEL: 'gen_ai.response.model',
  RESPONSE_ID: 'gen_ai.response.id',
  /** The server a provider sends its requests to, when it knows it. */
  SERVER_ADDRESS: 'server.address',
  SERVER_PORT: 'server.port',
  INPUT_TOKENS: 'gen_ai.usage.input_tokens',
  OUTPUT_TOKENS: 'gen_ai.usage.output_tokens',
  FINISH_REASONS: 'gen_ai.response.finish_reasons',
  ERROR_TYPE: 'error.type',
  RUN_ID: 'agent_lanes.run.id',
  RUN_STATUS: 'agent_lanes.run.status',
  TENANT: 'agent_lanes.tenant',
  TURN: 'agent_lanes.turn',
  CALL_INDEX: 'agent_lanes.call.index',
  /** How the call ended: `result`, `error` or `indeterminate`. */
  OUTCOME: 'agent_lanes.call.outcome',
  /** True when its body ran (every lane granted it a permit). */
  DISPATCHED: 'agent_lanes.call.dispatched',
  /** True when its body still ran when its call ended, keeping its permits. */
  OVERRUN: 'agent_lanes.call.overrun',
  /** A stopped or cut-off call's StopClass (`stopClassOf` of its outcome): `never_dispatched`, `safe_to_call_again` or `indeterminate`. */
  STOP_CLASS: 'agent_lanes.stop.class',
  /** Milliseconds from its first queue to its start (or to its end, if it never started). */
  LANE_WAIT_MS: 'agent_lanes.lane.wait_ms',
  /** The lanes it queued on, in the order taken. */
  LANES_QUEUED_ON: 'agent_lanes.lane.queued_on',
  /** The lane whose permit came last: the one that held it. */
  LANE_HELD_BY: 'agent_lanes.lane.held_by',
  /** On a `queued` event: the lane. On a `released` event: whether the grace gave up on the body. */
  LANE: 'agent_lanes.lane',
  ABANDONED: 'agent_lanes.call.abandoned',
  /** On a `limit_changed` event: the adaptive lane's new limit, the one before, and why it moved (`overload`, `latency`, `success`). */
  LANE_LIMIT: 'agent_lanes.lane.limit',
  LANE_PREVIOUS_LIMIT: 'agent_lanes.lane.previous_limit',
  LANE_LIMIT_CAUSE: 'agent_lanes.lane.limit_cause',
} as const;

/** The events on an execute_tool span. */
export const TracingEvents = {
  QUEUED: 'agent_lanes.lane.queued',
  STARTED: 'agent_lanes.call.started',
  RELEASED: 'agent_lanes.call.released',
  /** An adaptive lane's limit moved on this call's outcome. */
  LIMIT_CHANGED: 'agent_lanes.lane.limit_changed',
} as const;
