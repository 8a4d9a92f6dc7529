import { expect } from 'chai';
import { Observable, of, take, throwError } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { turnByTurn, type TurnSource } from '../../lib/runner/turn/turnByTurn.js';

// A source that hands out the given turns one by one, counting how often it was asked.
function turnsOf<T>(turns: Array<Observable<T>>, failed?: (error: unknown) => T | undefined): TurnSource<T> & { asked: number } {
  const source = {
    asked: 0,
    nextTurn: () => turns[source.asked++],
    ...(failed ? { turnFailed: failed } : {}),
  };
  return source;
}

describe('turnByTurn', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('reads each turn once the one before it completed, and completes when there is no next turn', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const first = cold('  -a-b|');
      const second = cold('     --c|');
      const third = cold('         (d|)');
      const source = turnsOf([first, second, third]);
      expectObservable(turnByTurn(source)).toBe('-a-b--c(d|)');
      expectSubscriptions(first.subscriptions).toBe('^---!');
      expectSubscriptions(second.subscriptions).toBe('----^--!');
      expectSubscriptions(third.subscriptions).toBe('-------(^!)');
    });
  });

  it('asks for the next turn only when the one before it completed (what it answered decides whether there is one)', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const asked: number[] = [];
      let n = 0;
      const source: TurnSource<string> = {
        nextTurn: () => {
          asked.push(testScheduler.now());
          return n < 3 ? cold('--x|', { x: `turn ${++n}` }) : undefined;
        },
      };
      expectObservable(turnByTurn(source)).toBe('--a--b--c|', { a: 'turn 1', b: 'turn 2', c: 'turn 3' });
      testScheduler.flush();
      expect(asked).to.deep.equal([0, 3, 6, 9]);
    });
  });

  it('hands a failed turn to turnFailed, whose value ends the sequence, and reads no turn after it', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const failing = cold('-a-#', undefined, new Error('boom'));
      const after = cold('  -z|');
      const source = turnsOf([failing, after], (error) => `failed: ${(error as Error).message}`);
      expectObservable(turnByTurn(source)).toBe('-a-(f|)', { a: 'a', f: 'failed: boom' });
      expectSubscriptions(after.subscriptions).toBe([]);
    });
  });

  it('ends with the error itself when the source has no turnFailed, or when turnFailed throws', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const error = new Error('boom');
      expectObservable(turnByTurn(turnsOf([cold('-a-#', undefined, error)]))).toBe('-a-#', undefined, error);
      const thrown = new Error('turnFailed threw');
      const source = turnsOf([cold('-#', undefined, error)], () => {
        throw thrown;
      });
      expectObservable(turnByTurn(source)).toBe('-#', undefined, thrown);
    });
  });

  it('completes without a value when turnFailed gives none', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      expectObservable(turnByTurn(turnsOf([cold('-a-#')], () => undefined))).toBe('-a-|');
    });
  });

  it('treats a nextTurn that throws as a failed turn', () => {
    const seen: unknown[] = [];
    turnByTurn<string>({
      nextTurn: () => {
        throw new Error('no turn');
      },
      turnFailed: (error) => `failed: ${(error as Error).message}`,
    }).subscribe({ next: (value) => seen.push(value), complete: () => seen.push('complete') });
    expect(seen).to.deep.equal(['failed: no turn', 'complete']);
  });

  it('ends the turn being read when its subscriber leaves, and asks for no other', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const first = cold('  -a|');
      const second = cold('   ----b|');
      const source = turnsOf([first, second, cold('c|')]);
      expectObservable(turnByTurn(source), '^----!').toBe('-a---');
      expectSubscriptions(second.subscriptions).toBe('--^--!');
      testScheduler.flush();
      expect(source.asked).to.equal(2);
    });
  });

  it('takes turns that complete synchronously in a loop, not by recursion: ten thousand turns, one stack depth', () => {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 1_000;
    try {
      let n = 0;
      const depths: number[] = [];
      const depth = (): number => new Error().stack?.split('\n').length ?? 0;
      const values: number[] = [];
      turnByTurn<number>({
        nextTurn: () => {
          depths.push(depth());
          return n < 10_000 ? of(++n) : undefined;
        },
      }).subscribe((value) => values.push(value));
      expect(values).to.have.length(10_000);
      expect(values[9_999]).to.equal(10_000);
      // The last turn is asked for from as deep in the stack as the first.
      expect(depths[10_000]).to.equal(depths[0]);
    } finally {
      Error.stackTraceLimit = limit;
    }
  });

  it('ends a turn still being subscribed as soon as its subscriber leaves, and starts no other', () => {
    let started = 0;
    const closedAfterFirst: boolean[] = [];
    let tornDown = 0;
    const turn = (label: string) =>
      new Observable<string>((subscriber) => {
        started++;
        subscriber.next(`${label} 1`);
        // Still inside subscribe: the reader that left is closed already, and hears nothing more.
        closedAfterFirst.push(subscriber.closed);
        subscriber.next(`${label} 2`);
        subscriber.complete();
        return () => tornDown++;
      });
    const heard: string[] = [];
    turnByTurn(turnsOf([turn('first'), turn('second')]))
      .pipe(take(1))
      .subscribe((value) => heard.push(value));
    expect(heard).to.deep.equal(['first 1']);
    expect(closedAfterFirst).to.deep.equal([true]);
    expect(started).to.equal(1);
    expect(tornDown).to.equal(1);
  });

  it('reads the error of a turn that fails while being subscribed', () => {
    const seen: unknown[] = [];
    turnByTurn(turnsOf([throwError(() => new Error('at once'))], (error) => `failed: ${(error as Error).message}`)).subscribe({
      next: (value) => seen.push(value),
      complete: () => seen.push('complete'),
    });
    expect(seen).to.deep.equal(['failed: at once', 'complete']);
  });
});
