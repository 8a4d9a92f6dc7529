import { expect } from 'chai';
import { identity, lastValueFrom, map, mergeMap, of, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { gate, type BatchCall, type GateStep, type GateVerdict } from '../../../lib/batch/index.js';
import { call } from '../helpers.js';
import { byId, labelled, recordsOf, resultOf } from './records.js';

describe('gate', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  const abc = (): BatchCall[] => ['a', 'b', 'c'].map((id) => call(id, () => id));

  it('asks about one call at a time, in call order, each only once the call before it was answered', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = recordsOf(abc());
      const verdicts = {
        a: cold('       ---|'),
        b: cold('          --(n|)', { n: 'not approved' }),
        c: cold('            -(p|)', { p: undefined }),
      };
      const source = hot('  -abc----|', byId(records));
      const subs = '        ^-------!';
      const expected = '    ----a-bc|';
      expectObservable(source.pipe(gate((c) => verdicts[c.callId as keyof typeof verdicts]), labelled)).toBe(expected, {
        a: 'a',
        b: 'b!ToolRejectedError:not approved',
        c: 'c',
      });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(verdicts.a.subscriptions).toBe('-^--!    ');
      expectSubscriptions(verdicts.b.subscriptions).toBe('----^-!  ');
      expectSubscriptions(verdicts.c.subscriptions).toBe('------^! ');
    });
  });

  it('takes the first value of an Observable verdict, and an empty one as a pass', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = recordsOf(abc());
      const verdicts = {
        a: cold('        -n-p|', { n: 'first', p: undefined }),
        b: cold('          -|'),
        c: cold('            -#', undefined, new RangeError('policy down')),
      };
      const source = hot('  -(abc)|', byId(records));
      const expected = '    --abc-|';
      expectObservable(source.pipe(gate((c) => verdicts[c.callId as keyof typeof verdicts]), labelled)).toBe(expected, {
        a: 'a!ToolRejectedError:first',
        b: 'b',
        c: 'c!RangeError:policy down',
      });
      expectSubscriptions(verdicts.a.subscriptions).toBe('-^!    ');
      expectSubscriptions(verdicts.b.subscriptions).toBe('--^!   ');
      expectSubscriptions(verdicts.c.subscriptions).toBe('---^!  ');
    });
  });

  const answers: Array<{ title: string; verdict: GateVerdict | Error; label: string }> = [
    { title: 'undefined lets the call through', verdict: undefined, label: 'a' },
    { title: 'null lets the call through', verdict: null as unknown as GateVerdict, label: 'a' },
    { title: 'a string refuses it with that text', verdict: 'over budget', label: 'a!ToolRejectedError:over budget' },
    { title: 'an ErrorInfo refuses it as it is', verdict: { name: 'PolicyError', message: 'no bookings on Sunday' }, label: 'a!PolicyError:no bookings on Sunday' },
    { title: 'an Error refuses it with its name and message', verdict: new TypeError('bad call'), label: 'a!TypeError:bad call' },
  ];
  for (const answer of answers) {
    it(`reads a synchronous verdict: ${answer.title}`, () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const { records } = recordsOf(abc().slice(0, 1));
        const source = cold('  -a|', byId(records));
        expectObservable(source.pipe(gate(() => answer.verdict as GateVerdict), labelled)).toBe('-a|', { a: answer.label });
      });
    });
  }

  it('waits for a Promise verdict before asking about the next call, and reads a rejection as a refusal', async () => {
    const { records } = recordsOf(abc());
    const told: string[] = [];
    const step: GateStep = async (c) => {
      told.push(`ask ${c.callId}`);
      // The first answer is the slowest: the next call is still asked only after it.
      await new Promise((resolve) => setTimeout(resolve, c.callId === 'a' ? 5 : 0));
      told.push(`answer ${c.callId}`);
      if (c.callId === 'b') return 'not approved';
      if (c.callId === 'c') throw new RangeError('policy down');
      return undefined;
    };
    const labels = await lastValueFrom(of(...records).pipe(gate(step), labelled, toArray()));
    expect(labels).to.deep.equal(['a', 'b!ToolRejectedError:not approved', 'c!RangeError:policy down']);
    expect(told).to.deep.equal(['ask a', 'answer a', 'ask b', 'answer b', 'ask c', 'answer c']);
  });

  it('refuses a call whose step throws, and goes on asking about the next', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const { records } = recordsOf(abc());
      const step: GateStep = (c) => {
        if (c.callId === 'b') throw new Error('hook failed');
        return undefined;
      };
      const source = cold('  a-b-c|', byId(records));
      const expected = '     a-b-c|';
      expectObservable(source.pipe(gate(step), labelled)).toBe(expected, { a: 'a', b: 'b!Error:hook failed', c: 'c' });
    });
  });

  it('does not ask about calls already refused (bad arguments) or already decided, and passes them on in turn', () => {
    const asked: string[] = [];
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const calls = [
        call('a', () => 'a'),
        call('b', () => 'b', { refused: { name: 'ToolArgumentsError', message: 'expected string at args.q' } }),
        call('c', () => 'c'),
        call('d', () => 'd'),
      ];
      const { records } = recordsOf(calls);
      records[2]!.refuse({ name: 'ToolRejectedError', message: 'refused upstream' });
      records[3]!.decide(resultOf(records[3]!, 'cached'));
      const verdict = cold('--|');
      const step: GateStep = (c) => (asked.push(c.callId), verdict);
      const source = cold('  (abcd|)', byId(records));
      const expected = '     --(abcd|)';
      expectObservable(source.pipe(gate(step), labelled)).toBe(expected, {
        a: 'a',
        b: 'b!ToolArgumentsError:expected string at args.q',
        c: 'c!ToolRejectedError:refused upstream',
        d: 'd=cached',
      });
      expectSubscriptions(verdict.subscriptions).toBe('^-!');
    });
    expect(asked).to.deep.equal(['a']);
  });

  it('is the identity without a step', () => {
    expect(gate()).to.equal(identity);
    expect(gate(undefined)).to.equal(identity);
  });

  it('asks nobody once the batch stopped: the call being asked goes on with its answer, the others wait to be classified', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { batch, records } = recordsOf(abc());
      const verdicts = { a: cold('   ---|'), b: cold('-|'), c: cold('-|') };
      const source = hot('  -abc--|', byId(records));
      const stop = hot('    --s    ');
      const expected = '    ----a--';
      stop.subscribe(() => batch.stop({ kind: 'cancelled', why: 'the user pressed stop' }));
      expectObservable(source.pipe(gate((c) => verdicts[c.callId as keyof typeof verdicts]), labelled)).toBe(expected, { a: 'a' });
      expectSubscriptions(verdicts.a.subscriptions).toBe('-^--!');
      expectSubscriptions(verdicts.b.subscriptions).toBe([]);
      expectSubscriptions(verdicts.c.subscriptions).toBe([]);
    });
  });

  it('asks nobody about the calls of a batch stopped before they came', () => {
    const asked: string[] = [];
    testScheduler.run(({ cold, expectObservable }) => {
      const { batch, records } = recordsOf(abc());
      batch.stop({ kind: 'cancelled', why: 'cancelled before the turn' });
      const source = cold('  (abc|)', byId(records));
      expectObservable(source.pipe(gate((c) => void asked.push(c.callId)), labelled)).toBe('-');
    });
    expect(asked).to.deep.equal([]);
  });

  it('waits for the answer being asked before completing', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const { records } = recordsOf(abc().slice(0, 1));
      const verdict = cold('  ----|');
      const source = cold('   a|', byId(records));
      const expected = '      ----(a|)';
      expectObservable(source.pipe(gate(() => verdict), labelled)).toBe(expected, { a: 'a' });
      expectSubscriptions(verdict.subscriptions).toBe('^---!');
    });
  });

  it('stops asking when unsubscribed early', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = recordsOf(abc());
      const verdict = cold('   -----|');
      const source = hot('  -a-b-c-|', byId(records));
      const subs = '        ^---!   ';
      const unsub = '       ^---!   ';
      expectObservable(source.pipe(gate(() => verdict), labelled), unsub).toBe('----');
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(verdict.subscriptions).toBe('-^--!');
    });
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = recordsOf(abc());
      const verdict = cold('   -|');
      const source = hot('  -a-b-c-|', byId(records));
      const subs = '        ^----!  ';
      const unsub = '       ^----!  ';
      const expected = '    --a-b-  ';
      const result = source.pipe(
        mergeMap((record) => of(record)),
        gate(() => verdict),
        mergeMap((record) => of(record)),
        labelled,
      );
      expectObservable(result, unsub).toBe(expected, { a: 'a', b: 'b' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(verdict.subscriptions).toBe(['-^!', '---^!']);
    });
  });

  it('gates a synchronous source with synchronous verdicts', () => {
    testScheduler.run(({ expectObservable }) => {
      const { records } = recordsOf(abc());
      const result = of(...records).pipe(
        gate((c) => (c.callId === 'b' ? 'no' : undefined)),
        labelled,
      );
      expectObservable(result).toBe('(abc|)', { a: 'a', b: 'b!ToolRejectedError:no', c: 'c' });
    });
  });

  it('passes on an error from its source, and stops waiting for the answer', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = recordsOf(abc());
      const verdict = cold('   ---|');
      const source = hot('  -a--b#', byId(records));
      const subs = '        ^----!';
      const expected = '    ----a#';
      expectObservable(source.pipe(gate(() => verdict), labelled)).toBe(expected, { a: 'a' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(verdict.subscriptions).toBe(['-^--!', '----^!']);
    });
  });

  it('maps records it is given to the same records', async () => {
    const { records } = recordsOf(abc());
    const out = await lastValueFrom(of(...records).pipe(gate(() => undefined), toArray()));
    expect(out).to.have.ordered.members(records);
    expect(out.map((record) => record.refused)).to.deep.equal([undefined, undefined, undefined]);
    // A plain map after the gate sees the records as they were when they passed.
    expect(await lastValueFrom(of(...records).pipe(gate(() => 'no'), map((r) => r.refused?.message), toArray()))).to.deep.equal(['no', 'no', 'no']);
  });
});
