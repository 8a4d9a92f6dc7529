// The cassette as a file: stable JSON (keys sorted at every depth, two-space indent, a
// trailing newline), no run ids and no secrets (the default and the recorder's redact keys,
// at any depth and inside JSON text), and a reader that names the path at fault.
import { expect } from 'chai';
import * as t from 'io-ts';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type RunEvent } from '../../lib/index.js';
import {
  CassetteFormatError,
  CassetteRecorder,
  CassetteReplay,
  cassetteTranscript,
  deterministicTranscript,
  parseCassette,
  stringifyCassette,
  type Cassette,
} from '../../lib/testing.js';

const planner = new Agent({ name: 'planner', instructions: 'Plan.', model: 'scripted' });
const SECRET = 'sk-live-0123456789';

/** Tools that leak the run id and secrets every way they can: in results, in keys, in deltas. */
function leakyTools(): ToolRegistry {
  return new ToolRegistry().register({ name: 'account', args: t.type({ user: t.string, password: t.string }) }, ({ user }, ctx) => {
    ctx.record({ session: { token: SECRET, user } });
    return {
      user,
      runId: ctx.runId,
      key: ctx.idempotencyKey,
      nested: { credentials: [{ apiKey: SECRET }] },
      accountNumber: 'DE44 5001',
      raw: JSON.stringify({ password: SECRET, user }),
    };
  });
}

async function recordLeaky(): Promise<{ cassette: Cassette; text: string; events: readonly RunEvent[] }> {
  const provider = new ScriptedProvider([
    { text: 'checking', toolCalls: [{ id: 'c1', name: 'account', arguments: `{"user":"ana","password":"${SECRET}"}` }] },
    { text: 'done' },
  ]);
  const recorder = new CassetteRecorder({ provider, tools: leakyTools(), redact: ['accountNumber'] });
  const runner = new AgentRunner({ provider: recorder.provider, tools: recorder.tools });
  const { cassette, result } = await recorder.record(runner, planner, 'Check my account', { state: { authorization: `Bearer ${SECRET}` } });
  expect(result.status).to.equal('completed');
  return { cassette, text: stringifyCassette(cassette), events: result.events };
}

/** Keys sorted at every depth. */
function sortedDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedDeep);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortedDeep((value as Record<string, unknown>)[key])]));
}

describe('cassette files', () => {
  it('are JSON with keys sorted at every depth, two-space indent and a trailing newline', async () => {
    const { text } = await recordLeaky();
    expect(text.endsWith('}\n')).to.equal(true);
    expect(text.startsWith('{\n  "ending": {\n    "output": "done",\n    "type": "RUN_COMPLETED"\n  },\n')).to.equal(true);
    // JSON.stringify keeps insertion order, so this is the same text only if every key was already sorted.
    expect(`${JSON.stringify(sortedDeep(JSON.parse(text)), null, 2)}\n`).to.equal(text);
  });

  it('hold neither the run id nor any redacted value, wherever it appeared', async () => {
    const { cassette, text, events } = await recordLeaky();
    const runId = (events[0] as { runId: string }).runId;
    expect(text).to.not.include(runId);
    expect(text).to.not.include(SECRET);
    expect(text).to.not.include('DE44');
    const result = cassette.turns[0]!.calls[0]!;
    expect(result).to.deep.include({
      kind: 'result',
      result: {
        user: 'ana',
        runId: '<runId>',
        key: '<runId>:c1',
        nested: { credentials: [{ apiKey: '[redacted]' }] },
        accountNumber: '[redacted]',
        raw: '{"password":"[redacted]","user":"ana"}',
      },
      deltas: [{ session: { token: '[redacted]', user: 'ana' } }],
    });
    expect(cassette.run.state).to.deep.equal({ authorization: '[redacted]' });
    // Inside JSON text too: the model's arguments, and the tool message of the next request.
    const reply = cassette.turns[0]!.reply as { response: { toolCalls: Array<{ arguments: string }> } };
    expect(JSON.parse(reply.response.toolCalls[0]!.arguments)).to.deep.equal({ user: 'ana', password: '[redacted]' });
    expect(cassette.redact).to.include('accountnumber').and.include('password');
  });

  it('replay a redacted cassette to its own transcript, redacted values and all', async () => {
    const { cassette } = await recordLeaky();
    const replay = new CassetteReplay(cassette, { agent: planner, tools: leakyTools() });
    const replayed = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
    expect(deterministicTranscript(replayed.events)).to.deep.equal(cassetteTranscript(cassette));
    expect(replayed.state).to.deep.equal({ authorization: '[redacted]', session: { token: '[redacted]', user: 'ana' } });
  });

  it('hold the same transcript the recorded run gave, when nothing was redacted', async () => {
    const tools = new ToolRegistry().register({ name: 'echo' }, (args, ctx) => ({ args, key: ctx.idempotencyKey }));
    const recorder = new CassetteRecorder({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'e1', name: 'echo', arguments: { x: 1 } }] }, { text: 'ok' }]), tools });
    const { cassette, result } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), planner, 'hi');
    expect(cassetteTranscript(cassette)).to.deep.equal(deterministicTranscript(result.events));
  });

  describe('parseCassette', () => {
    const failures: Array<{ title: string; text: (good: string) => string; path: string; message: string }> = [
      { title: 'text that is not JSON', text: () => '{ not json', path: '', message: 'not a cassette: the text is not JSON' },
      {
        title: 'another version',
        text: (good) => good.replace('"version": 1', '"version": 2'),
        path: 'version',
        message: 'not a cassette: version is 2; this library reads version 1',
      },
      {
        title: 'a field of the wrong type',
        text: (good) => good.replace('"turn": 2', '"turn": "2"'),
        path: 'turns.1.turn',
        message: 'not a cassette: turns.1.turn: expected number, got "2"',
      },
      {
        title: 'a fingerprint edited without its hash',
        text: (good) => good.replace('"instructions": "Plan."', '"instructions": "Plan better."'),
        path: 'fingerprint.sha256',
        message: 'fingerprint.sha256 is not the hash of the fingerprint it sits in',
      },
    ];
    for (const c of failures) {
      it(`refuses ${c.title}, naming the path`, async () => {
        const { text } = await recordLeaky();
        let thrown: unknown;
        try {
          parseCassette(c.text(text));
        } catch (error) {
          thrown = error;
        }
        expect(thrown).to.be.instanceOf(CassetteFormatError);
        expect((thrown as CassetteFormatError).path).to.equal(c.path);
        expect((thrown as Error).message).to.include(c.message);
      });
    }

    it('reads back what stringifyCassette wrote', async () => {
      const { cassette, text } = await recordLeaky();
      expect(parseCassette(text)).to.deep.equal(JSON.parse(text));
      expect(stringifyCassette(parseCassette(text))).to.equal(stringifyCassette(cassette));
    });
  });
});
