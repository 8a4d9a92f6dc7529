import { expect } from 'chai';
import { Observable, Subject, take } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Stage, staged } from '../../../lib/directSubscriber.js';

// A stage that doubles numbers, throws on a negative one, and says how its source ended.
class Doubling extends Stage<number> {
  ended = 0;
  protected take(value: number): void {
    if (value < 0) throw new Error(`negative: ${value}`);
    this.out.next(value * 2);
  }
  protected override sourceCompleted(): void {
    this.ended++;
    super.sourceCompleted();
  }
}

describe('Stage (how the batch operators subscribe)', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('passes on what take() makes of each value, and completes with its source, letting go of it then', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('-a-b-|', { a: 1, b: 2 });
      expectObservable(source.pipe(staged((out) => new Doubling(out)))).toBe('-a-b-|', { a: 2, b: 4 });
      expectSubscriptions(source.subscriptions).toBe('^----!');
    });
  });

  it('turns a throw in take() into its error, and unsubscribes its source', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('-a-b-c|', { a: 1, b: -1, c: 3 });
      expectObservable(source.pipe(staged((out) => new Doubling(out)))).toBe('-a-#', { a: 2 }, new Error('negative: -1'));
      expectSubscriptions(source.subscriptions).toBe('^--!');
    });
  });

  it("passes its source's error on", () => {
    testScheduler.run(({ hot, expectObservable }) => {
      const error = new Error('upstream');
      expectObservable(hot('-a-#', { a: 1 }, error).pipe(staged((out) => new Doubling(out)))).toBe('-a-#', { a: 2 }, error);
    });
  });

  it('unsubscribes its source when its subscriber leaves', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('-a-b-c-|', { a: 1, b: 2, c: 3 });
      expectObservable(source.pipe(staged((out) => new Doubling(out))), '^--!').toBe('-a-', { a: 2 });
      expectSubscriptions(source.subscriptions).toBe('^--!');
    });
  });

  it('ends a source still being subscribed as soon as its subscriber leaves: the source sees itself closed and the stage hears no more', () => {
    const closed: boolean[] = [];
    let emitted = 0;
    const source = new Observable<number>((subscriber) => {
      for (let i = 1; i <= 3; i++) {
        emitted++;
        subscriber.next(i);
        closed.push(subscriber.closed);
      }
      subscriber.complete();
    });
    const heard: number[] = [];
    let stage: Doubling | undefined;
    source
      .pipe(
        staged((out) => (stage = new Doubling(out))),
        take(1),
      )
      .subscribe((value) => heard.push(value));
    expect(heard).to.deep.equal([2]);
    // The source's subscriber is the stage itself: closed from the first value on.
    expect(closed).to.deep.equal([true, true, true]);
    expect(emitted).to.equal(3);
    expect(stage?.closed).to.equal(true);
    expect(stage?.ended).to.equal(0);
  });

  it('hears nothing once closed', () => {
    const values = new Subject<number>();
    const heard: number[] = [];
    const subscription = values.pipe(staged((out) => new Doubling(out))).subscribe((value) => heard.push(value));
    values.next(1);
    subscription.unsubscribe();
    values.next(2);
    expect(heard).to.deep.equal([2]);
    expect(values.observed).to.equal(false);
  });
});
