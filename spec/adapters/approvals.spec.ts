// The UI round trip of a run waiting for a person, with the ai package's own chat state
// (AbstractChat), transport and reader against uiMessageStreamHandler on 127.0.0.1: the reply
// asks for approval on the booking's tool part, addToolApprovalResponse answers, the chat sends
// the answer on its own, and the run goes on where it waited. The snapshot stays on the server;
// a replayed, forged, foreign or altered answer is refused and changes nothing.
import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema, type UIMessage, type UIMessageChunk } from 'ai';
import sinon from 'sinon';
import { Agent, AgentRunner, InMemorySnapshotStore, ScriptedProvider, ToolRegistry, type ScriptStep } from '../../lib/index.js';
import { resumeApproved, uiMessageStreamHandler, uiMessageStreamResponse } from '../../lib/streaming.js';
import { fromUIMessages } from '../../lib/providers/aiSdkProvider.js';
import { ApprovalsChat } from '../../examples/approvals/chat.js';
import { serve, type TestServer } from './runs.js';

const agent = new Agent({ name: 'concierge', instructions: 'Book rooms.', model: 'test-model' });

async function bodyOf(request: IncomingMessage): Promise<{ messages: UIMessage[] }> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: UIMessage[] };
}

// The server: each request either answers a waiting run (resumed from its kept snapshot) or starts one.
async function server(steps: ScriptStep[]) {
  const book = sinon.spy((args: unknown) => `booked room ${(args as { room: number }).room}`);
  const tools = new ToolRegistry().register({ name: 'book', needsApproval: true }, book).register({ name: 'lookup' }, () => 'free');
  const runner = new AgentRunner({ provider: new ScriptedProvider(steps), tools });
  const store = new InMemorySnapshotStore();
  const handler = uiMessageStreamHandler(
    async (request, signal) => {
      const { messages } = await bodyOf(request);
      const tenant = String(request.headers['x-tenant'] ?? 'default');
      return (await resumeApproved(messages, { runner, agent, store, tenant, signal })) ?? runner.run$(agent, fromUIMessages(messages), { signal, tenant });
    },
    { snapshots: store },
  );
  return { book, store, http: await serve(handler) };
}

const script = (): ScriptStep[] => [
  { toolCalls: [{ id: 'l1', name: 'lookup', arguments: {} }, { id: 'b1', name: 'book', arguments: { room: 7 } }] },
  { text: 'Room 7 is yours.' },
];

type ToolPart = { type: string; toolCallId: string; state: string; approval?: { id: string }; output?: unknown; errorText?: string };
const toolParts = (chat: ApprovalsChat): ToolPart[] => (chat.messages.at(-1)?.parts ?? []).filter((p) => p.type.startsWith('tool-')) as unknown as ToolPart[];
const settled = async (chat: ApprovalsChat): Promise<void> => {
  for (let i = 0; i < 200 && (chat.status === 'submitted' || chat.status === 'streaming'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
};

describe('approvals through the UI message stream', () => {
  let http: TestServer | undefined;
  afterEach(async () => {
    await http?.close();
    http = undefined;
  });

  it('asks for approval on the tool part, and once addToolApprovalResponse answers, the booking runs and the run ends', async () => {
    const made = await server(script());
    http = made.http;
    const chat = new ApprovalsChat(`${http.url}/api/chat`);
    await chat.sendMessage({ text: 'Book room 7' });
    await settled(chat);
    const asked = toolParts(chat);
    expect(asked.map((p) => [p.toolCallId, p.state])).to.deep.equal([['l1', 'output-available'], ['b1', 'approval-requested']]);
    expect(made.book.called).to.equal(false);
    expect(made.store.size).to.equal(1);
    await chat.addToolApprovalResponse({ id: asked[1]!.approval!.id, approved: true });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await settled(chat);
    expect(made.book.callCount).to.equal(1);
    const done = toolParts(chat);
    expect(done.map((p) => [p.toolCallId, p.state, p.output])).to.deep.equal([['l1', 'output-available', 'free'], ['b1', 'output-available', 'booked room 7']]);
    expect(chat.messages.at(-1)!.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).to.include('Room 7 is yours.');
    expect(made.store.size).to.equal(0);
  });

  it('tells the model the reason a person refused with, and runs nothing', async () => {
    const made = await server(script());
    http = made.http;
    const chat = new ApprovalsChat(`${http.url}/api/chat`);
    await chat.sendMessage({ text: 'Book room 7' });
    await settled(chat);
    await chat.addToolApprovalResponse({ id: toolParts(chat)[1]!.approval!.id, approved: false, reason: 'not today' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await settled(chat);
    expect(made.book.called).to.equal(false);
    // The SDK's own denied state; the part keeps the person's answer and reason.
    expect(toolParts(chat)[1]).to.deep.include({ state: 'output-denied', approval: { id: toolParts(chat)[1]!.approval!.id, approved: false, reason: 'not today' } });
    expect(toolParts(chat)[1]!.errorText).to.equal(undefined);
  });

  it('keeps the snapshot and asks for approval from a fetch Response too (uiMessageStreamResponse)', async () => {
    const store = new InMemorySnapshotStore();
    const tools = new ToolRegistry().register({ name: 'book', needsApproval: true }, () => 'booked').register({ name: 'lookup' }, () => 'free');
    const runner = new AgentRunner({ provider: new ScriptedProvider(script()), tools });
    const response = uiMessageStreamResponse((signal) => runner.run$(agent, 'Book room 7', { signal }), { snapshots: store });
    const chunks = parseJsonEventStream({ stream: response.body!, schema: uiMessageChunkSchema }).pipeThrough(
      new TransformStream<{ success: boolean; value?: UIMessageChunk }, UIMessageChunk>({ transform: (result, controller) => controller.enqueue(result.value!) }),
    );
    let message: UIMessage | undefined;
    for await (const snapshot of readUIMessageStream({ stream: chunks })) message = snapshot;
    const asked = (message!.parts as unknown as ToolPart[]).find((p) => p.toolCallId === 'b1')!;
    expect(asked.state).to.equal('approval-requested');
    expect(store.size).to.equal(1);
    expect((await store.get(asked.approval!.id.split(':')[0]!))?.tenant).to.equal('default');
  });

  describe('who may approve', () => {
    // A run that waits, and the request body that would answer it, as a client sends it.
    async function waiting(tenant = 'default') {
      const made = await server(script());
      http = made.http;
      const chat = new ApprovalsChat(`${http.url}/api/chat`, undefined, { 'x-tenant': tenant });
      await chat.sendMessage({ text: 'Book room 7' });
      await settled(chat);
      const part = toolParts(chat)[1]!;
      const answered = (id: string, extra: Record<string, unknown> = {}): UIMessage[] => {
        const messages = structuredClone(chat.messages);
        const last = messages.at(-1)!;
        last.parts = last.parts.map((p) => ((p as unknown as ToolPart).toolCallId === 'b1' ? ({ ...p, state: 'approval-responded', approval: { id, approved: true }, ...extra } as typeof p) : p));
        return messages;
      };
      const post = (messages: UIMessage[], as = tenant) => fetch(`${http!.url}/api/chat`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-tenant': as }, body: JSON.stringify({ id: 'chat', messages, trigger: 'submit-message' }) });
      return { ...made, id: part.approval!.id, answered, post };
    }

    it('refuses an answer replayed after the run moved on, and books once', async () => {
      const run = await waiting();
      const first = await run.post(run.answered(run.id));
      expect(first.status).to.equal(200);
      await first.text();
      const again = await run.post(run.answered(run.id));
      expect(again.status).to.equal(403);
      expect(await again.text()).to.match(/^ApprovalRefusedError: .*waits no more/);
      expect(run.book.callCount).to.equal(1);
    });

    it('refuses an answer for another tenant\'s run, keeping it waiting for its own', async () => {
      const run = await waiting('acme');
      const foreign = await run.post(run.answered(run.id), 'globex');
      expect(foreign.status).to.equal(403);
      expect(await foreign.text()).to.match(/not this tenant's/);
      expect(run.book.called).to.equal(false);
      expect(run.store.size).to.equal(1);
      expect((await run.post(run.answered(run.id), 'acme')).status).to.equal(200);
    });

    it('refuses an answer for a call the run does not wait on, changing nothing', async () => {
      const run = await waiting();
      const forged = await run.post(run.answered(run.id.replace(/:b1$/, ':l1')));
      expect(forged.status).to.equal(403);
      expect(await forged.text()).to.match(/no call l1 of this run waits/);
      expect(run.store.size).to.equal(1);
      expect(run.book.called).to.equal(false);
    });

    it('refuses an answer for a run that never waited here (a made-up or altered id)', async () => {
      const run = await waiting();
      const made = await run.post(run.answered(`${'0'.repeat(64)}:b1`));
      expect(made.status).to.equal(403);
      expect(run.store.size).to.equal(1);
    });

    it('books with the model\'s arguments, whatever the client says they were', async () => {
      const run = await waiting();
      const response = await run.post(run.answered(run.id, { input: { room: 1 } }));
      await response.text();
      expect(run.book.firstCall.args[0]).to.deep.equal({ room: 7 });
    });

    it('starts no run and takes nothing when the answers are for two runs at once', async () => {
      const run = await waiting();
      const messages = run.answered(run.id);
      const last = messages.at(-1)!;
      last.parts = [...last.parts, { type: 'tool-book', toolCallId: 'x', state: 'approval-responded', input: {}, approval: { id: `${'f'.repeat(64)}:x`, approved: true } } as unknown as (typeof last.parts)[number]];
      const response = await run.post(messages);
      expect(response.status).to.equal(403);
      expect(run.store.size).to.equal(1);
    });
  });
});
