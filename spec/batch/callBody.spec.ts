// What a call's body does (CallBody), read in its record's one state: the answer it takes (a
// value, a Promise, an Observable's first value), its failure, its stall, and the call ending
// first, including while its body's synchronous part still runs.
import { expect } from 'chai';
import { NEVER, Observable, of, type Subscriber } from 'rxjs';
import { BatchScope, type CallRecord, type CallState, type InvokeContext } from '../../lib/batch/index.js';
import { EventLoopStalledError, ToolTimedOutError } from '../../lib/errors.js';
import { LaneTable } from '../../lib/lanes/index.js';
import { Entry, step } from './entry.js';
import { brief, call } from './helpers.js';

// A record of a fresh batch, entered in one lane of `table` (limit 1); its body is handed the record too.
function entered(body: (context: InvokeContext, record: CallRecord) => unknown, table = new LaneTable()): { record: CallRecord; entry: Entry; table: LaneTable } {
  const record: CallRecord = new BatchScope().record(call('a', (context) => body(context, record)), 0);
  const entry = new Entry([step('t', 1, table)]);
  record.enter(entry);
  return { record, entry, table };
}

const held = (table: LaneTable): number => table.get('t')?.holders ?? 0;

describe('CallBody (in its record\'s state)', () => {
  it('is queued until every lane granted, and over once its plain answer is the result', () => {
    const table = new LaneTable();
    const other = table.enter('t', 1, () => undefined);
    const states: CallState[] = [];
    const { record } = entered((context) => {
      states.push(record.state);
      return context.ended ? 'ended' : 'open';
    }, table);
    states.unshift(record.state);
    other.leave();
    expect(states).to.deep.equal(['queued', 'invoking']);
    expect([record.state, brief(record.outcome!)]).to.deep.equal(['over', 'a=open']);
  });

  it('awaits a Promise, counting in its lane, and takes what it resolves to', async () => {
    let resolve: (value: string) => void = () => undefined;
    const { record, table } = entered(() => new Promise<string>((r) => (resolve = r)));
    expect([record.state, held(table)]).to.deep.equal(['awaiting', 1]);
    resolve('done');
    await Promise.resolve();
    expect([record.state, brief(record.outcome!), held(table)]).to.deep.equal(['over', 'a=done', 0]);
  });

  it('is the observer of an Observable answer itself, takes its first value and unsubscribes', () => {
    let observer: Subscriber<unknown> | undefined;
    let unsubscribed = 0;
    const answer = new Observable<string>((subscriber) => {
      observer = subscriber;
      return () => unsubscribed++;
    });
    const { record } = entered(() => answer);
    expect(record.state).to.equal('subscribed');
    observer!.next('first');
    observer!.next('second');
    expect([record.state, brief(record.outcome!), unsubscribed]).to.deep.equal(['over', 'a=first', 1]);
  });

  it('takes an Observable that completes without a value as an undefined result, and one that errors as the failure', () => {
    expect(brief(entered(() => new Observable((subscriber) => subscriber.complete())).record.outcome!)).to.equal('a=undefined');
    expect(brief(entered(() => new Observable((subscriber) => subscriber.error(new RangeError('no')))).record.outcome!)).to.equal('a!RangeError');
    expect(brief(entered(() => of(1, 2)).record.outcome!)).to.equal('a=1');
  });

  it('fails the call when the body throws, or its Observable cannot be subscribed', () => {
    const thrown = entered(() => {
      throw new TypeError('bad');
    });
    expect([thrown.record.state, brief(thrown.record.outcome!), held(thrown.table)]).to.deep.equal(['over', 'a!TypeError', 0]);
    const hostile = Object.assign(Object.create(Observable.prototype) as object, {
      subscribe: () => {
        throw new SyntaxError('cannot');
      },
    });
    expect(brief(entered(() => hostile).record.outcome!)).to.equal('a!SyntaxError');
  });

  it('unsubscribes an Observable answer when its call ends first, and aborts its signal on a teardown', () => {
    let signal: AbortSignal | undefined;
    let unsubscribed = 0;
    const { record, table } = entered((context) => {
      signal = context.signal;
      return new Observable(() => () => unsubscribed++);
    });
    record.teardown();
    expect([record.state, unsubscribed, signal!.aborted, held(table)]).to.deep.equal(['over', 1, true, 0]);
    // Ended once: a second teardown changes nothing.
    record.teardown();
    expect(unsubscribed).to.equal(1);
  });

  it('overruns its call when its Promise is still running at the end, keeping its lane until it settles', async () => {
    let resolve: (value: string) => void = () => undefined;
    const { record, table } = entered(() => new Promise<string>((r) => (resolve = r)));
    record.cutOff(new ToolTimedOutError('lookup', 2));
    expect([record.state, brief(record.outcome!), held(table)]).to.deep.equal(['overrun', 'a!ToolTimedOutError', 1]);
    resolve('late');
    await Promise.resolve();
    // The late answer changes nothing of the outcome; the lane is left.
    expect([record.state, brief(record.outcome!), held(table)]).to.deep.equal(['over', 'a!ToolTimedOutError', 0]);
  });

  it('is returning when its call ends while its synchronous part runs, and its answer then says whether its lane is kept', async () => {
    let resolve: (value: string) => void = () => undefined;
    const states: CallState[] = [];
    const table = new LaneTable();
    const promised = entered((_context, record) => {
      record.teardown();
      states.push(record.state);
      // Still counted in the lane while the synchronous part runs.
      states.push(held(table) === 1 ? 'invoking' : 'over');
      return new Promise<string>((r) => (resolve = r));
    }, table);
    expect(states).to.deep.equal(['returning', 'invoking']);
    expect([promised.record.state, held(promised.table)]).to.deep.equal(['overrun', 1]);
    resolve('late');
    await Promise.resolve();
    expect([promised.record.state, held(promised.table)]).to.deep.equal(['over', 0]);

    let subscribed = false;
    const observed = entered((_context, record) => {
      record.teardown();
      return new Observable(() => void (subscribed = true));
    });
    // An Observable answer of a call that ended meanwhile is not subscribed at all.
    expect([observed.record.state, subscribed, held(observed.table)]).to.deep.equal(['over', false, 0]);

    const plain = entered((_context, record) => (record.teardown(), 'value'));
    expect([plain.record.state, plain.record.outcome, held(plain.table)]).to.deep.equal(['over', undefined, 0]);
  });

  it('fails its call on a stall, and hears no stall once the call ended', () => {
    const { record } = entered(() => NEVER);
    record.body.loopStalled(new EventLoopStalledError('lookup', 120, 100));
    expect(brief(record.outcome!)).to.equal('a!EventLoopStalledError');
    const ended = record.outcome;
    record.body.loopStalled(new EventLoopStalledError('lookup', 500, 100));
    expect(record.outcome).to.equal(ended);
  });

  it('ends a call whose body never started: it will not start', () => {
    const table = new LaneTable();
    const other = table.enter('t', 1, () => undefined);
    let invoked = false;
    const { record } = entered(() => (invoked = true), table);
    record.teardown();
    other.leave();
    expect([record.state, invoked, record.outcome]).to.deep.equal(['over', false, undefined]);
  });
});
