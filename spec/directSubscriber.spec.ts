import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Observable, Subscriber, type Subscription } from 'rxjs';
import { DirectSubscriber, Stage, staged } from '../lib/directSubscriber.js';
import { Agent, AgentRunner, runBatch, ToolRegistry, type BatchCall, type ModelResponse } from '../lib/index.js';
import { turnByTurn } from '../lib/runner/turn/turnByTurn.js';

// A record that keeps what it heard, and leaves its source after `leaveAfter` values.
class Keeper extends DirectSubscriber<number> {
  readonly heard: string[] = [];
  constructor(private readonly leaveAfter = Infinity) {
    super();
  }
  override next(value: number): void {
    if (this.closed) return;
    this.heard.push(`next ${value}`);
    if (this.heard.length >= this.leaveAfter) this.unsubscribe();
  }
  override error(error: unknown): void {
    if (this.closed) return;
    this.unsubscribe();
    this.heard.push(`error ${String(error)}`);
  }
  override complete(): void {
    if (this.closed) return;
    this.unsubscribe();
    this.heard.push('complete');
  }
}

// A source that hands out `values` synchronously, for as long as its subscriber is open, and
// says who its subscriber was and whether its teardown ran.
function watched(values: number[], ending: 'complete' | 'error' | 'none' = 'complete') {
  const seen: { subscriber: Subscriber<number> | undefined; emitted: number; tornDown: boolean } = { subscriber: undefined, emitted: 0, tornDown: false };
  const source = new Observable<number>((subscriber) => {
    seen.subscriber = subscriber;
    for (const value of values) {
      if (subscriber.closed) break;
      seen.emitted++;
      subscriber.next(value);
    }
    if (ending === 'complete') subscriber.complete();
    if (ending === 'error') subscriber.error('boom');
    return () => {
      seen.tornDown = true;
    };
  });
  return { source, seen };
}

describe('DirectSubscriber (how the records subscribe)', () => {
  describe('on the installed RxJS', () => {
    it('is what the source is handed and what subscribe returns: no wrapper', () => {
      const keeper = new Keeper();
      const { source, seen } = watched([1, 2]);
      const returned: Subscription = source.subscribe(keeper);
      expect(seen.subscriber).to.equal(keeper);
      expect(returned).to.equal(keeper);
      expect(keeper).to.be.instanceOf(Subscriber);
      expect(keeper.heard).to.deep.equal(['next 1', 'next 2', 'complete']);
    });

    it("runs the source's teardown when it leaves, and hears nothing after", () => {
      const keeper = new Keeper();
      const { source, seen } = watched([1], 'none');
      source.subscribe(keeper);
      expect(seen.tornDown).to.equal(false);
      keeper.unsubscribe();
      expect(seen.tornDown).to.equal(true);
      seen.subscriber!.next(2);
      expect(keeper.heard).to.deep.equal(['next 1']);
    });

    it("runs the source's teardown when the source errs, and hears the error", () => {
      const keeper = new Keeper();
      const { source, seen } = watched([1], 'error');
      source.subscribe(keeper);
      expect(seen.tornDown).to.equal(true);
      expect(keeper.heard).to.deep.equal(['next 1', 'error boom']);
    });

    it('reaches a source still being subscribed when it leaves: the source sees itself closed', () => {
      const keeper = new Keeper(2);
      const { source, seen } = watched([1, 2, 3, 4, 5]);
      source.subscribe(keeper);
      expect(seen.emitted).to.equal(2);
      expect(keeper.closed).to.equal(true);
      expect(keeper.heard).to.deep.equal(['next 1', 'next 2']);
    });
  });

  describe("the library's records", () => {
    it("a batch stage is its source's subscriber itself", () => {
      class Passing extends Stage<number> {
        protected take(value: number): void {
          this.out.next(value);
        }
      }
      const { source, seen } = watched([1, 2]);
      const got: number[] = [];
      source.pipe(staged((out) => new Passing(out))).subscribe((value) => got.push(value));
      expect(seen.subscriber).to.be.instanceOf(Passing);
      expect(seen.subscriber).to.be.instanceOf(DirectSubscriber);
      expect(got).to.deep.equal([1, 2]);
    });

    it("runBatch's first stage is the calls' subscriber itself", () => {
      let subscriber: Subscriber<BatchCall> | undefined;
      const calls = new Observable<BatchCall>((s) => {
        subscriber = s;
        s.complete();
      });
      runBatch(calls).subscribe();
      expect(subscriber).to.be.instanceOf(DirectSubscriber);
    });

    it("a request to the model is the provider's Observable's subscriber itself", async () => {
      let subscriber: Subscriber<ModelResponse> | undefined;
      const provider = {
        respond: () =>
          new Observable<ModelResponse>((s) => {
            subscriber = s;
            s.next({ text: 'done' });
            s.complete();
          }),
      };
      const runner = new AgentRunner({ provider, tools: new ToolRegistry() });
      const result = await runner.run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go');
      expect(result.status).to.equal('completed');
      expect(subscriber).to.be.instanceOf(DirectSubscriber);
    });

    it("the turn reader is each turn's subscriber itself", () => {
      const seen: unknown[] = [];
      let n = 0;
      const turns = turnByTurn({
        nextTurn: () =>
          n++ < 2
            ? new Observable<number>((s) => {
                seen.push(s);
                s.next(n);
                s.complete();
              })
            : undefined,
      });
      const got: number[] = [];
      turns.subscribe((value) => got.push(value));
      expect(got).to.deep.equal([1, 2]);
      expect(seen).to.have.length(2);
      for (const s of seen) expect(s).to.be.instanceOf(DirectSubscriber);
    });

    // A class that is a Subscription and an Observer but not a Subscriber is taken as the
    // subscriber itself by RxJS 7's duck typing only; every such record extends DirectSubscriber.
    it('no class in lib/ poses as a subscriber by duck typing', () => {
      const lib = fileURLToPath(new URL('../lib/', import.meta.url));
      const posing: string[] = [];
      const files = readdirSync(lib, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'));
      expect(files.length).to.be.greaterThan(50);
      for (const file of files) {
        const text = readFileSync(join(lib, file), 'utf8');
        for (const match of text.matchAll(/class\s+(\w+)[^{]*\bextends\s+Subscription\b[^{]*\{/g)) {
          if (/\bObserver\b|\bResponseObserver\b/.test(match[0]) || /\n  (?:override )?(?:next|complete)\(/.test(bodyOf(text, match.index + match[0].length))) posing.push(`${file}: ${match[1]}`);
        }
      }
      expect(posing).to.deep.equal([]);
    });
  });
});

// The text of a class body, from just after its opening brace to its closing one.
function bodyOf(text: string, start: number): string {
  let depth = 1;
  let i = start;
  while (i < text.length && depth > 0) {
    const c = text[i++];
    if (c === '{') depth++;
    else if (c === '}') depth--;
  }
  return text.slice(start, i);
}
