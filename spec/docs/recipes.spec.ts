// The docs' runnable recipes run: every ```ts block marked `<!-- runs -->` is run as written (its
// imports of agent-lanes and its entries pointed at lib/) in a process of its own, around it the runner and
// agent of spec/docs/recipeWorld.ts. A recipe that serves HTTP is sent what useChat sends, by
// the `ai` package's own DefaultChatTransport, to /api/chat, and its answer read with
// readUIMessageStream; any other must exit cleanly, and one whose last line is a comment (the
// README's first run) must print exactly that comment.
import { spawn, type ChildProcess } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { documentedBlocks, type CodeBlock } from './codeBlocks.js';
import { entrySources } from './compileBlocks.js';
import { pageModule } from './pageProgram.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const recipes = documentedBlocks(ROOT).filter((block) => block.mark === 'runs');

/** The recipe as a module of its own, importing the library from lib/ and the world first. A recipe imports what it uses: nothing is imported for it. */
function recipeModule(block: CodeBlock): string {
  const lib = (path: string): string => pathToFileURL(join(ROOT, path)).href;
  const sources = entrySources(ROOT);
  const text = pageModule([block], new Set()).text.replace(/from '(agent-lanes(?:\/[\w-]+)?)'/g, (whole, entry: string) =>
    sources[entry] === undefined ? whole : `from '${lib(sources[entry][0]!)}'`,
  );
  return `import '${lib('spec/docs/recipeWorld.ts')}';\n${text}\n`;
}

/** Runs `file` under tsx; resolves with the port once it listens, or with its exit code. */
function start(file: string, children: ChildProcess[]): Promise<{ port?: number; code?: number | null; out: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  return new Promise((resolve) => {
    child.stdout!.on('data', (data: Buffer) => {
      out += data.toString();
      const listening = /^listening (\d+)$/m.exec(out);
      if (listening) resolve({ port: Number(listening[1]), out: () => out });
    });
    child.stderr!.on('data', (data: Buffer) => (out += data.toString()));
    child.on('exit', (code) => resolve({ code, out: () => out }));
  });
}

describe('the docs\' runnable recipes', function () {
  this.timeout(60_000);
  const children: ChildProcess[] = [];
  const files: string[] = [];
  after(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
    await Promise.all(children.map((child) => (child.exitCode === null && child.signalCode === null ? new Promise((resolve) => child.once('exit', resolve)) : undefined)));
    await Promise.all(files.map((file) => rm(file, { force: true })));
  });

  it('include the README\'s first run, the useChat handler and the ReadableStream reader', () => {
    expect(recipes.map((block) => block.file)).to.include.members(['README.md', 'docs/streaming.md']);
    expect(recipes.length).to.be.at.least(3);
    // The first program a reader meets is the one that runs.
    expect(documentedBlocks(ROOT).find((block) => block.file === 'README.md')?.mark).to.equal('runs');
  });

  for (const block of recipes) {
    it(`runs ${block.file}:${block.line} as written`, async () => {
      const file = join(ROOT, 'spec', 'docs', `.recipe-${process.pid}-${block.line}.ts`);
      files.push(file);
      await writeFile(file, recipeModule(block));
      const started = await start(file, children);
      if (started.port === undefined) {
        expect(started.code, started.out()).to.equal(0);
        expect(started.out().trim(), 'what the recipe printed').to.not.equal('');
        // A last line `// ...` says what the recipe prints.
        const said = /\n\/\/ (.*)\s*$/.exec(block.code);
        if (said !== null) expect(started.out().trim(), 'what the recipe printed').to.equal(said[1]);
        return;
      }
      // A server: asked as useChat asks, by the SDK's own transport.
      const transport = new DefaultChatTransport<UIMessage>({ api: `http://127.0.0.1:${started.port}/api/chat` });
      const stream = await transport.sendMessages({
        chatId: 'chat-1',
        messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Hotels in Lisbon?' }] }],
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
      });
      let message: UIMessage | undefined;
      for await (const snapshot of readUIMessageStream({ stream })) message = snapshot;
      const parts = message!.parts.filter((part) => part.type !== 'step-start');
      expect(parts.map((part) => part.type), started.out()).to.deep.equal(['tool-lookup', 'text']);
      expect(parts[0]).to.deep.include({ toolCallId: 'c1', state: 'output-available', output: { city: 'Lisbon', from: 122 } });
      expect(parts[1]).to.deep.include({ type: 'text', text: 'Lisbon from {"city":"Lisbon","from":122} (3 messages seen).' });
    });
  }
});
