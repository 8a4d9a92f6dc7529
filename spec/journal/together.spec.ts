// The journal with the rest of the runner: a streamed turn cut off mid-stream, and a run whose
// calls take fleet lanes (RedisLaneStore), each crashed and recovered.
import { expect } from 'chai';
import { Observable } from 'rxjs';
import { ConcurrencyConfig, InMemoryRunJournal, ToolRegistry, type ModelStreamPart, type RunEvent } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { redisFixture } from '../lanes/redis/server.js';
import { agent, runnerWith, settle } from './helpers.js';

const line = (e: RunEvent): string =>
  e.type === 'TOOL_RESULT' ? `${e.callId} result` : e.type === 'TOOL_INDETERMINATE' ? `${e.callId} indeterminate` : e.type === 'TOOL_ERROR' ? `${e.callId} error: ${e.error.message}` : e.type;

// A registry whose `slow` body answers only when aborted in the process that crashes (so the
// spec can let go of its lanes as the dead process would), and at once in the one that recovers.
function slowTools(hangs: boolean, ran: string[]): ToolRegistry {
  return new ToolRegistry().register({ name: 'slow' }, (args, ctx) => {
    ran.push((args as { id: string }).id);
    return hangs ? new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('stopped')))) : 'done';
  });
}

// Runs `runner`'s run$ until the spec crashes it; resolves with its run id.
function runIdOf(run$: Observable<RunEvent>): { id: () => string; stop: () => void } {
  let runId = '';
  const subscription = run$.subscribe((event) => (runId = event.type === 'RUN_STARTED' ? event.runId : runId));
  return { id: () => runId, stop: () => subscription.unsubscribe() };
}

describe('the journal with the rest of the runner', () => {
  it('recovers a streamed turn cut off mid-stream from the calls it had dispatched', async () => {
    const journal = new InMemoryRunJournal();
    const ran: string[] = [];
    // The stream gives two calls and is never finished: its answer is never written.
    const stream = () =>
      new Observable<ModelStreamPart>((subscriber) => {
        subscriber.next({ type: 'tool-call', id: 'a', name: 'slow', arguments: { id: 'a' } });
        subscriber.next({ type: 'tool-call', id: 'b', name: 'slow', arguments: { id: 'b' } });
      });
    const first = runIdOf(runnerWith(journal, slowTools(true, ran), [stream] as never).run$(agent, 'go'));
    for (let i = 0; i < 3; i++) await settle();
    await journal.flushed();
    journal.simulateCrash();
    const result = await runnerWith(journal.reopen(), slowTools(false, ran), [{ text: 'done' }]).recover(agent, first.id());
    expect(result.events.map(line)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'a indeterminate', 'b indeterminate', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
    expect(ran).to.deep.equal(['a', 'b']);
    first.stop();
  });

  it('recovers every call a streamed turn cut by a crash had written, in call order: settled ones read back, dispatched ones classified, queued ones run', async () => {
    const journal = new InMemoryRunJournal();
    const ran: Record<string, number> = {};
    const count = (args: unknown): string => {
      const { id } = args as { id: string };
      ran[id] = (ran[id] ?? 0) + 1;
      return `${id} done`;
    };
    // The first process: `quick` answers, the others hang until stopped; the recovering one: every body answers.
    const registry = (hangs: boolean): ToolRegistry => {
      const hang = (args: unknown, ctx: { signal: AbortSignal }): unknown => (count(args), hangs ? new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('stopped')))) : `${(args as { id: string }).id} done`);
      return new ToolRegistry().register({ name: 'quick' }, count).register({ name: 'slow' }, hang).register({ name: 'note' }, hang).register({ name: 'look', idempotent: true }, hang);
    };
    const concurrency = new ConcurrencyConfig({ perTool: { slow: 1 } });
    const ended: string[] = [];
    // q1 settles (its end hook runs), s1 runs, s2 waits behind it in the slow lane, n3 and x4 run; the stream never ends.
    const stream = () =>
      new Observable<ModelStreamPart>((subscriber) => {
        for (const [id, name] of [['q1', 'quick'], ['s1', 'slow'], ['s2', 'slow'], ['n3', 'note'], ['x4', 'look']] as const) subscriber.next({ type: 'tool-call', id, name, arguments: { id } });
      });
    const first = runIdOf(runnerWith(journal, registry(true), [stream] as never, { concurrency, hooks: { onToolEnd: (call) => void ended.push(call.callId) } }).run$(agent, 'go'));
    for (let i = 0; i < 5; i++) await settle();
    await journal.flushed();
    expect(ended, 'q1 settled before the crash').to.deep.equal(['q1']);
    expect(ran).to.deep.equal({ q1: 1, s1: 1, n3: 1, x4: 1 });
    journal.simulateCrash();
    const result = await runnerWith(journal.reopen(), registry(false), [{ text: 'done' }], { concurrency }).recover(agent, first.id());
    first.stop();
    expect(result.events.map(line)).to.deep.equal([
      'RUN_STARTED', 'MODEL_RESPONSE',
      'q1 result', 's1 indeterminate', 's2 result', 'n3 indeterminate', 'x4 error: look was in flight when the process running it stopped. Safe to call again',
      'MODEL_RESPONSE', 'RUN_COMPLETED',
    ]);
    expect(ran, 'q1 ran once, before the crash; s2 once, after it').to.deep.equal({ q1: 1, s1: 1, s2: 1, n3: 1, x4: 1 });
    expect(result.messages.filter((m) => m.role === 'tool').map((m) => m.toolCallId)).to.deep.equal(['q1', 's1', 's2', 'n3', 'x4']);
  });

  describe('on a RedisLaneStore', function () {
    this.timeout(30_000);
    const redis = redisFixture('journal');

    it('records each dispatch once the fleet lane grants it, and recovers the queued calls into the lane', async () => {
      const concurrency = new ConcurrencyConfig({ perTool: { slow: 1 } });
      const store = (): RedisLaneStore => {
        const made = new RedisLaneStore({ client: redis.client, prefix: redis.prefix, leaseSeconds: 1 });
        redis.stores.push(made);
        return made;
      };
      const journal = new InMemoryRunJournal();
      const ran: string[] = [];
      const calls = ['a', 'b', 'c'].map((id) => ({ id, name: 'slow', arguments: { id } }));
      const first = runIdOf(runnerWith(journal, slowTools(true, ran), [{ toolCalls: calls }], { concurrency, lanes: store() }).run$(agent, 'go'));
      while (ran.length === 0) await settle();
      await journal.flushed();
      const entries = await journal.read(first.id());
      expect(entries.filter((e) => e.kind === 'dispatched').map((e) => 'callId' in e && e.callId), 'only the call the lane granted').to.deep.equal(['a']);
      journal.simulateCrash();
      // The crashed process's fleet permit goes back (as its lease would lapse); the recovering runner's calls take the lane after it.
      first.stop();
      const result = await runnerWith(journal.reopen(), slowTools(false, ran), [{ text: 'done' }], { concurrency, lanes: store() }).recover(agent, first.id());
      expect(result.events.map(line)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'a indeterminate', 'b result', 'c result', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
      expect(ran).to.deep.equal(['a', 'b', 'c']);
    });
  });
});
