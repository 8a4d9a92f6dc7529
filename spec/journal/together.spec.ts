// The journal with the rest of the runner: a streamed turn cut off mid-stream, and a run whose
// calls take fleet lanes (RedisLaneStore), each crashed and recovered.
import { expect } from 'chai';
import { Observable } from 'rxjs';
import { ConcurrencyConfig, InMemoryRunJournal, RedisLaneStore, ToolRegistry, type ModelStreamPart, type RunEvent } from '../../lib/index.js';
import { clearPrefix, nodeRedis, requireRedis, uniquePrefix, type NodeRedis } from '../lanes/redis/server.js';
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

  describe('on a RedisLaneStore', function () {
    this.timeout(30_000);
    const prefix = uniquePrefix('journal');
    let client: NodeRedis;
    const stores: RedisLaneStore[] = [];

    before(async () => {
      await requireRedis();
      client = await nodeRedis();
    });

    after(async () => {
      for (const store of stores) await store.close();
      if (client !== undefined) {
        await clearPrefix(client, prefix);
        await client.close();
      }
    });

    it('records each dispatch once the fleet lane grants it, and recovers the queued calls into the lane', async () => {
      const concurrency = new ConcurrencyConfig({ perTool: { slow: 1 } });
      const store = (): RedisLaneStore => {
        const made = new RedisLaneStore({ client, prefix, leaseSeconds: 1 });
        stores.push(made);
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
