// toAsyncIterable: an Observable (a run's transcript) read with `for await`. Values in order,
// values buffered until pulled, the error at the pull that reaches it, no subscription before
// the first pull, and leaving the loop early unsubscribes: a run stops and its bodies abort.
import { expect } from 'chai';
import { Observable, of, Subject, throwError, concat } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type RunEvent } from '../../lib/index.js';
import { toAsyncIterable } from '../../lib/streaming.js';

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const values: T[] = [];
  for await (const value of iterable) values.push(value);
  return values;
}

describe('toAsyncIterable', () => {
  it('yields every value in order, then ends', async () => {
    expect(await collect(toAsyncIterable(of(1, 2, 3)))).to.deep.equal([1, 2, 3]);
  });

  it("yields a run's transcript, event by event", async () => {
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'ping', arguments: {} }] }, { text: 'done' }]);
    const runner = new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'ping' }, async () => 'pong') });
    const events = await collect(toAsyncIterable(runner.run$(new Agent({ name: 'a', instructions: '', model: 'm' }), 'hi')));
    expect(events.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_RESULT', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
  });

  it('does not subscribe before the first pull', async () => {
    let subscribed = 0;
    const source$ = new Observable<number>((subscriber) => {
      subscribed++;
      subscriber.next(1);
      subscriber.complete();
    });
    const iterator = toAsyncIterable(source$)[Symbol.asyncIterator]();
    expect(subscribed).to.equal(0);
    expect(await iterator.next()).to.deep.equal({ value: 1, done: false });
    expect(subscribed).to.equal(1);
  });

  it('buffers values that arrive before they are pulled', async () => {
    const subject = new Subject<string>();
    const iterator = toAsyncIterable(subject)[Symbol.asyncIterator]();
    const first = iterator.next();
    subject.next('a');
    subject.next('b');
    subject.next('c');
    subject.complete();
    expect(await first).to.deep.equal({ value: 'a', done: false });
    expect(await iterator.next()).to.deep.equal({ value: 'b', done: false });
    expect(await iterator.next()).to.deep.equal({ value: 'c', done: false });
    expect(await iterator.next()).to.deep.equal({ value: undefined, done: true });
  });

  it('serves pulls made before the last one settled, in order', async () => {
    const subject = new Subject<number>();
    const iterator = toAsyncIterable(subject)[Symbol.asyncIterator]();
    const pulls = [iterator.next(), iterator.next(), iterator.next()];
    subject.next(1);
    subject.next(2);
    subject.complete();
    expect(await Promise.all(pulls)).to.deep.equal([
      { value: 1, done: false },
      { value: 2, done: false },
      { value: undefined, done: true },
    ]);
  });

  it('rethrows the error at the pull that reaches it, after the values before it', async () => {
    const values: number[] = [];
    const error = await (async () => {
      for await (const value of toAsyncIterable(concat(of(1, 2), throwError(() => new Error('boom'))))) values.push(value);
    })().catch((e: unknown) => e);
    expect(values).to.deep.equal([1, 2]);
    expect((error as Error).message).to.equal('boom');
  });

  it('unsubscribes when the loop is left early', async () => {
    let tornDown = false;
    const source$ = new Observable<number>((subscriber) => {
      subscriber.next(1);
      subscriber.next(2);
      return () => (tornDown = true);
    });
    for await (const value of toAsyncIterable(source$)) if (value === 1) break;
    expect(tornDown).to.equal(true);
  });

  it('stops a run when the loop is left mid-batch: the tool body sees its signal abort', async () => {
    let signal: AbortSignal | undefined;
    const tools = new ToolRegistry().register({ name: 'wait' }, (_args, ctx) => {
      signal = ctx.signal;
      return new Promise(() => undefined);
    });
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'wait', arguments: {} }] }]);
    const runner = new AgentRunner({ provider, tools });
    const seen: RunEvent['type'][] = [];
    for await (const event of toAsyncIterable(runner.run$(new Agent({ name: 'a', instructions: '', model: 'm' }), 'hi'))) {
      seen.push(event.type);
      if (event.type === 'MODEL_RESPONSE') {
        await new Promise((resolve) => setImmediate(resolve));
        break;
      }
    }
    expect(seen).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE']);
    expect(signal?.aborted).to.equal(true);
  });
});
