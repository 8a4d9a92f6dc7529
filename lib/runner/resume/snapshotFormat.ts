// A run's snapshot as data: its format, version, calls, and the answers a person gives to its
// waiting calls. Types only (and the two constants that name the format): the run's events and
// results carry a snapshot, so this file imports nothing of the runner's but the model's types.
import type { Outcome } from '../../batch/index.js';
import type { RunState } from '../../tools/index.js';
import type { Message, Usage } from '../model/model.js';

/** What the snapshot's `format` says. */
export const snapshotFormat = 'agent-lanes/run-snapshot';
/** The snapshot version this library writes, and the newest it reads. */
export const snapshotVersion = 1;

/** A call of the waiting turn, as the snapshot keeps it. */
export type SnapshotCall =
  /** Its outcome went out before the run waited (`told`), or came while it waited (`settled`): never run again. */
  | { readonly status: 'told' | 'settled'; readonly callId: string; readonly tool: string; readonly outcome: Outcome }
  /** Waits for a person's answer; `args` are the model's, as the approver sees them. */
  | { readonly status: 'approval'; readonly callId: string; readonly tool: string; readonly args: unknown }
  /** In a later phase than a waiting call: runs once the run goes on. */
  | { readonly status: 'held'; readonly callId: string; readonly tool: string }
  /** Its body started a nested run that waits: the call runs again, its nested run going on from `snapshot`. */
  | { readonly status: 'nested'; readonly callId: string; readonly tool: string; readonly snapshot: RunSnapshot };

/** A run that waits for a person, as plain JSON (docs/resuming.md). */
export interface RunSnapshot {
  readonly format: typeof snapshotFormat;
  readonly version: number;
  readonly runId: string;
  /** The agent's name; `fingerprint` is its and its tools' (lib/runner/resume/fingerprint.ts). */
  readonly agent: string;
  readonly fingerprint: string;
  readonly tenant: string;
  /** The turn whose batch waits. */
  readonly turn: number;
  /** The conversation: to the turn's assistant message, then the tool messages told before the run waited. */
  readonly messages: readonly Message[];
  /** The run's state when the batch started. */
  readonly state: RunState;
  /** The tokens of the run's turns so far, and of its nested runs. */
  readonly usage?: Usage;
  readonly nestedUsage?: Usage;
  /** The turn's calls, in call order. */
  readonly calls: readonly SnapshotCall[];
  /** The hex sha256 of the canonical JSON of every other field: a snapshot changed since is refused. */
  readonly digest: string;
}

/** A call waiting for a person's answer, as `RunResult.pending` lists it. */
export interface PendingCall {
  /** The id to answer it by: a nested run's call is `<caller's callId>/<its callId>`. */
  readonly callId: string;
  readonly tool: string;
  /** The arguments the model gave, as the approver sees them. */
  readonly args: unknown;
}

/** A person's answer to a waiting call: yes, no, or no with the reason the model will read. */
export type Approval = boolean | { readonly approved: false; readonly reason?: string };

/** The answers, by the callId `pending` lists. */
export type Approvals = Readonly<Record<string, Approval>>;

/** What a nested call goes on with: its nested run's snapshot and the answers meant for it. */
export interface NestedResume {
  readonly snapshot: RunSnapshot;
  readonly approvals: Approvals;
}
