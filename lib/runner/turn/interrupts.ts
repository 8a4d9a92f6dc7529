// The calls of one turn that wait for a person: a call whose approval was left to one, a call
// of a later phase waiting behind it (the order rules), a call whose nested run waits for one. The
// batch runs everything else the order rules allow; the outcomes from the first waiting call on
// are kept back here, and once the batch is over the run either ends `interrupted` (its snapshot
// keeps them) or, stopped meanwhile, tells them as any stopped batch would.
import { errorOutcome, type BatchCall, type GateVerdict, type Outcome } from '../../batch/index.js';
import { CallStoppedError } from '../../errors.js';
import { jsonForm } from '../../json.js';
import { neverDispatchedMessage } from '../../stopClass.js';
import type { RunEvent } from '../events.js';
import { agentFingerprint } from '../resume/fingerprint.js';
import type { Agent } from '../Agent.js';
import type { Message, Usage } from '../model/model.js';
import type { RunState, ToolRegistry } from '../../tools/index.js';
import { pendingOf, snapshotDigest } from '../resume/snapshot.js';
import { snapshotFormat, snapshotVersion, type RunSnapshot, type SnapshotCall } from '../resume/snapshotFormat.js';
import type { RunnerCall } from './turnCalls.js';

/** Why a call waits: its own approval, an earlier call's (it is in a later phase), its nested run's. */
export type Wait = 'approval' | 'order' | 'nested';

type GateStepOf = (call: BatchCall, index: number) => GateVerdict | Promise<GateVerdict>;

const whyOf: Record<Exclude<Wait, 'nested'>, (tool: string) => string> = {
  approval: (tool) => `${tool} is waiting for a person's approval`,
  order: () => 'an earlier call of its turn is waiting for a person\'s approval',
};

/** One turn's waiting calls. Made by the run for each batch in which a call may wait. */
export class TurnWaits {
  /** Why each call waits, by index; undefined for a call that does not. */
  readonly waits: Array<Wait | undefined> = [];
  /** The snapshot of a waiting nested run, by the index of the call whose body started it. */
  readonly nested: Array<RunSnapshot | undefined> = [];
  /** The index of the first call that waits; Infinity while none does. */
  first = Infinity;
  /** The outcomes from `first` on, as they came (call order), kept back until the batch is over. */
  readonly later: Outcome[] = [];

  constructor(
    /** The turn's calls by index (a streamed turn adds them as they come). */
    readonly calls: RunnerCall[],
    /** Each result's JSON, by index, as the settle step made it. */
    readonly contents: Array<string | undefined>,
  ) {}

  /** True once some call waits. */
  get waiting(): boolean {
    return this.first !== Infinity;
  }

  /** Makes `call` wait for `why`: it goes on through the batch with an outcome of its own, never dispatched. */
  wait(call: BatchCall, index: number, why: Exclude<Wait, 'nested'>): undefined {
    this.mark(index, why);
    const error = new CallStoppedError(neverDispatchedMessage(whyOf[why](call.tool)), false);
    (call as RunnerCall).outcome = errorOutcome({ index, callId: call.callId, tool: call.tool }, false, { name: error.name, message: error.message }, { kind: 'cancelled', why: whyOf[why](call.tool) });
    return undefined;
  }

  /** The body of `call` started a nested run that now waits for a person, as `snapshot` says. */
  nestedWaits(call: RunnerCall, snapshot: RunSnapshot): void {
    const index = this.calls.indexOf(call);
    if (index < 0 || this.nested[index] !== undefined) return;
    this.nested[index] = snapshot;
    this.mark(index, 'nested');
  }

  /**
   * The gate in front of the policies: a call of a later phase than a waiting call waits
   * behind it, unasked (a phase runs only once every call before it has ended).
   */
  gate(next: GateStepOf | undefined): GateStepOf {
    return (call, index) => {
      if (this.first < index && !this.samePhase(index)) return this.wait(call, index, 'order');
      return next === undefined ? undefined : next(call, index);
    };
  }

  /** True when the call at `index` is in the phase of the first waiting call: every call between is parallel-safe. */
  private samePhase(index: number): boolean {
    const { calls } = this;
    for (let k = this.first; k <= index; k++) if (calls[k]?.parallelSafe === false) return false;
    return true;
  }

  private mark(index: number, why: Wait): void {
    this.waits[index] = why;
    if (index < this.first) this.first = index;
  }
}

// The arguments of a call waiting for approval, as the approver sees them: the policies' frozen
// view, in its JSON form (a view that has none: what the model sent).
function shownArgs(call: RunnerCall): unknown {
  try {
    return jsonForm(call.shown);
  } catch {
    return typeof call.args === 'string' ? call.args : null;
  }
}

/** What a waiting run's snapshot keeps of it, as the run (run.ts) hands it over. */
export interface WaitingRun {
  readonly runId: string;
  readonly agent: Agent;
  /** The runner's tools: the snapshot's fingerprint is the agent's and theirs. */
  readonly tools: ToolRegistry;
  readonly tenant: string;
  readonly messages: readonly Message[];
  readonly state: RunState;
  readonly usage: Usage | undefined;
  readonly nestedUsage: Usage | undefined;
}

/**
 * The run's final event once turn `n`'s batch is over and some call waits for a person:
 * RUN_INTERRUPTED, with the calls waiting and the run's snapshot (plain JSON, its digest over the
 * rest). The outcomes from the first waiting call on are kept in it, not told: a resumed run
 * tells them in call order.
 */
export function interrupted(run: WaitingRun, n: number, outcomes: readonly Outcome[], waits: TurnWaits): RunEvent {
  const calls = waits.calls.map((call, index): SnapshotCall => {
    const { callId, tool } = call;
    const outcome = outcomes[index]!;
    if (index < waits.first) return { status: 'told', callId, tool, outcome };
    switch (waits.waits[index]) {
      case 'approval':
        return { status: 'approval', callId, tool, args: shownArgs(call) };
      case 'order':
        return { status: 'held', callId, tool };
      case 'nested':
        return { status: 'nested', callId, tool, snapshot: waits.nested[index]! };
      case undefined:
        return { status: 'settled', callId, tool, outcome };
    }
  });
  const { usage, nestedUsage } = run;
  const taken = {
    format: snapshotFormat,
    version: snapshotVersion,
    runId: run.runId,
    agent: run.agent.name,
    fingerprint: agentFingerprint(run.agent, run.tools),
    tenant: run.tenant,
    turn: n,
    messages: run.messages,
    state: run.state,
    ...(usage === undefined ? {} : { usage }),
    ...(nestedUsage === undefined ? {} : { nestedUsage }),
    calls,
  };
  // Plain JSON from here: what a store gives back is what the run kept.
  const plain = JSON.parse(JSON.stringify(taken)) as Omit<RunSnapshot, 'digest'>;
  const snapshot: RunSnapshot = { ...plain, digest: snapshotDigest(plain) };
  return { type: 'RUN_INTERRUPTED', pending: pendingOf(snapshot), snapshot };
}
