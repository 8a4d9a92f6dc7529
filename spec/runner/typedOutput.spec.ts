// Typed output: run() on an Agent<O> resolves RunResult<O>, and run$'s RUN_COMPLETED carries an
// O. These specs are checked by the type-checker first (npm test runs tsc before mocha): each
// assignment below would not compile were the output typed `unknown`, and each
// `@ts-expect-error` would fail the check were the output typed too loosely.
import { expect } from 'chai';
import * as t from 'io-ts';
import { filter, lastValueFrom } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type RunCompletedEvent, type RunEvent, type RunResult } from '../../lib/index.js';
import { toAsyncIterable, toUIMessageStream } from '../../lib/streaming.js';

const Quote = t.type({ city: t.string, from: t.number });
type Quote = t.TypeOf<typeof Quote>;

const quoting = new Agent({ name: 'quoting', instructions: 'Quote a hotel as JSON.', model: 'test-model', output: Quote });
const runnerAnswering = (text: string): AgentRunner => new AgentRunner({ provider: new ScriptedProvider([{ text }]), tools: new ToolRegistry() });

describe('typed output', () => {
  it('run() on an Agent<O> resolves a RunResult<O> whose output, once completed, is an O', async () => {
    const result: RunResult<Quote> = await runnerAnswering('{"city":"Lisbon","from":122}').run(quoting, 'Lisbon?');
    expect(result.status).to.equal('completed');
    if (result.status !== 'completed') return;
    const quote: Quote = result.output;
    const from: number = result.output.from;
    // @ts-expect-error the output is a Quote, not a string
    const wrong: string = result.output;
    expect([quote, from, wrong]).to.deep.equal([{ city: 'Lisbon', from: 122 }, 122, { city: 'Lisbon', from: 122 }]);
  });

  it('has no output on a run that did not complete, and says so in its type', async () => {
    const result = await runnerAnswering('not JSON').run(quoting, 'Lisbon?');
    expect(result.status).to.equal('failed');
    if (result.status === 'completed') return;
    const none: undefined = result.output;
    expect(none).to.equal(undefined);
    expect(result.error?.message).to.contain('is not JSON');
  });

  it('run$() on an Agent<O> emits RunEvent<O>: its RUN_COMPLETED carries an O', async () => {
    const events$ = runnerAnswering('{"city":"Porto","from":115}').run$(quoting, 'Porto?');
    const completed = await lastValueFrom(events$.pipe(filter((event: RunEvent<Quote>): event is RunCompletedEvent<Quote> => event.type === 'RUN_COMPLETED')));
    const quote: Quote = completed.output;
    // @ts-expect-error the output is a Quote, not a number
    const wrong: number = completed.output;
    expect([quote, wrong]).to.deep.equal([{ city: 'Porto', from: 115 }, { city: 'Porto', from: 115 }]);
  });

  it('hands a typed run$ to the adapters that take any run', async () => {
    const chunks = await lastValueFrom(toUIMessageStream(runnerAnswering('{"city":"Faro","from":90}').run$(quoting, 'Faro?')).pipe(filter((c) => c.type === 'data-output')));
    expect(chunks).to.deep.include({ data: { city: 'Faro', from: 90 } });
    const seen: RunEvent<Quote>[] = [];
    for await (const event of toAsyncIterable(runnerAnswering('{"city":"Faro","from":90}').run$(quoting, 'Faro?'))) seen.push(event);
    expect(seen.at(-1)).to.deep.equal({ type: 'RUN_COMPLETED', output: { city: 'Faro', from: 90 } });
  });

  it('narrows RUN_COMPLETED from run$ by its type alone', async () => {
    let seen: Quote | undefined;
    for (const event of await new Promise<RunEvent<Quote>[]>((resolve) => {
      const all: RunEvent<Quote>[] = [];
      runnerAnswering('{"city":"Faro","from":90}').run$(quoting, 'Faro?').subscribe({ next: (e) => all.push(e), complete: () => resolve(all) });
    })) {
      if (event.type === 'RUN_COMPLETED') seen = event.output;
    }
    expect(seen).to.deep.equal({ city: 'Faro', from: 90 });
  });

  it('leaves a free-text agent\'s output unknown unless the agent is declared Agent<string>', async () => {
    const chatty = new Agent<string>({ name: 'chatty', instructions: 'Talk.', model: 'test-model' });
    const result = await runnerAnswering('hello').run(chatty, 'hi');
    if (result.status !== 'completed') throw new Error(`expected completed, got ${result.status}`);
    const text: string = result.output;
    expect(text).to.equal('hello');
    const plain = new Agent({ name: 'plain', instructions: 'Talk.', model: 'test-model' });
    const untyped = await runnerAnswering('hello').run(plain, 'hi');
    // @ts-expect-error an agent without an output type answers `unknown`
    const notString: string = untyped.output;
    expect(notString).to.equal('hello');
  });
});
