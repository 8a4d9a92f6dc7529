// The package as a user gets it. A copy of this checkout, without dist/, is packed (its prepare
// script builds dist/, as a git or folder install does); the tarball and its peers are installed
// from the registry into a fresh project under the system's temp folder; then the install is
// used as the docs say: the getting-started program compiled under `nodenext` and `bundler`
// with skipLibCheck off and run, `require` from CommonJS (plain and compiled TypeScript), and the
// marble test of docs/testing.md in virtual time, with the project's own rxjs and with a second
// copy beside the library's; the `agent-lanes/ai-sdk` entry compiled and run with the AI SDK's
// mock model; and every ```ts block of the README and docs/ (as spec/docs/snippets.spec.ts reads
// them) compiled against the installed package. One install serves those checks; a second
// project installs the package with no optional peer at all and compiles, skipLibCheck off, and
// runs the README's first run, the getting-started program, and a program that imports every
// entry whose integration needs no peer. Each integration with peers gets a project of its own,
// with that entry's peers and nothing else optional, and a small program through that entry,
// compiled skipLibCheck off and run. The folder is removed at the end.
import { execFile } from 'node:child_process';
import { access, cp, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { blockGlobals, docPages, libraryOf, whereIn } from '../docs/compileBlocks.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Top-level entries of the checkout a fresh clone would not have. */
const NOT_IN_A_CLONE = new Set(['node_modules', 'dist', '.git', '.bench', 'scratch', '.scratch-out', join('.ci', 'out')]);
const inAClone = (path: string): boolean => !NOT_IN_A_CLONE.has(path.split(sep)[0]!) && !NOT_IN_A_CLONE.has(path);
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const REGISTRY = process.env['npm_config_registry'] ?? 'https://registry.npmjs.org/';

// npm run from `npm test` inherits the outer run's settings: its local prefix would make an
// install in the temp project land in this checkout. Only the registry, cache and TLS settings go on.
const npmEnv: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !/^npm_(lifecycle_|package_|command$|config_local_prefix$)/i.test(key)),
);

/** The fields of the installed package.json these checks read. */
interface Manifest {
  readonly name: string;
  readonly version: string;
  readonly license?: string;
  readonly repository?: { readonly url?: string };
  readonly keywords?: readonly string[];
  readonly sideEffects?: boolean;
  readonly scripts?: Readonly<Record<string, string>>;
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly peerDependencies?: Readonly<Record<string, string>>;
  readonly peerDependenciesMeta?: Readonly<Record<string, { readonly optional?: boolean }>>;
  readonly exports: Readonly<Record<string, unknown>>;
}

interface Ran {
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a program to its end; rejects with what it printed when it fails. */
function run(file: string, args: readonly string[], cwd: string, options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((resolvePromise, reject) => {
    execFile(file, args, { cwd, env: options.env ?? process.env, timeout: options.timeoutMs ?? 120_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const overran = error?.killed === true ? ` (stopped after ${options.timeoutMs ?? 120_000} ms)` : '';
      if (error) reject(new Error(`${[file, ...args].join(' ')} (in ${cwd}) failed${overran}: ${error.message}\n${stdout}\n${stderr}`.trim()));
      else resolvePromise({ stdout, stderr });
    });
  });
}

const node = (args: readonly string[], cwd: string): Promise<Ran> => run(process.execPath, args, cwd);
// Several compile side by side, skipLibCheck off, on a machine that may be busy.
const tsc = (project: string): Promise<Ran> => run(process.execPath, [TSC, '-p', project], dirname(project), { timeoutMs: 300_000 });

const exists = (path: string): Promise<boolean> => access(path).then(
  () => true,
  () => false,
);

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

/** The first ```ts block after the line `heading` of a markdown file. */
function codeAfter(markdown: string, heading: string, file: string): string {
  const lines = markdown.split('\n');
  const at = lines.indexOf(heading);
  if (at < 0) throw new Error(`${file} has no line "${heading}"`);
  const open = lines.findIndex((line, i) => i > at && line.startsWith('```ts'));
  const close = lines.findIndex((line, i) => i > open && line.startsWith('```'));
  if (open < 0 || close < 0) throw new Error(`${file} has no ts block after "${heading}"`);
  return lines.slice(open + 1, close).join('\n');
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of markdown.replace(/^```[\s\S]*?^```/gm, '').split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Markdown with fenced blocks and inline code blanked out, so their brackets are not read as links. */
const withoutCode = (markdown: string): string => markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');

/** A package's name, from `name` or `name@range` (scoped or not). */
const nameOf = (spec: string): string => spec.replace(/(?<=.)@.*$/, '');

/**
 * A small program through each entry of the exports map, and what the project it runs in installs
 * beside the package and its required peers: that entry's optional peers, nothing else optional.
 * Each prints `ok <entry>`.
 */
const ENTRY_PROGRAMS: Readonly<Record<string, { readonly peers: readonly string[]; readonly program: string; readonly dom?: true }>> = {
  '.': { peers: [], program: "import { Agent, AgentRunner, ScriptedProvider, ToolRegistry } from 'agent-lanes';\nconst runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'hi' }]), tools: new ToolRegistry() });\nconst result = await runner.run(new Agent({ name: 'a', instructions: 'Greet.', model: 'scripted' }), 'hi');\nconsole.log('ok .', result.status);" },
  './providers': { peers: [], program: "import { OpenAIChatProvider, AnthropicMessagesProvider, retryPolicy, ProviderHttpError } from 'agent-lanes/providers';\nimport type { ModelProvider } from 'agent-lanes';\nconst providers: ModelProvider[] = [new OpenAIChatProvider({ apiKey: 'k' }), new AnthropicMessagesProvider({ apiKey: 'k' })];\nconsole.log('ok ./providers', providers.length, typeof retryPolicy, typeof ProviderHttpError);" },
  './streaming': { peers: [], program: "import { Agent, AgentRunner, ScriptedProvider, ToolRegistry } from 'agent-lanes';\nimport { toAsyncIterable, sseHandler } from 'agent-lanes/streaming';\nconst runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'hi' }]), tools: new ToolRegistry() });\nconst types: string[] = [];\nfor await (const event of toAsyncIterable(runner.run$(new Agent({ name: 'a', instructions: 'Greet.', model: 'scripted' }), 'hi'))) types.push(event.type);\nconsole.log('ok ./streaming', types.at(-1), typeof sseHandler);" },
  './testing': { peers: [], program: "import { CassetteRecorder, CassetteReplay, ScriptedProvider, deterministicTranscript } from 'agent-lanes/testing';\nconsole.log('ok ./testing', typeof CassetteRecorder, typeof CassetteReplay, typeof ScriptedProvider, typeof deterministicTranscript);" },
  './redis': { peers: ['redis'], program: "import { createClient } from 'redis';\nimport { RedisLaneStore } from 'agent-lanes/redis';\nimport type { LaneStore } from 'agent-lanes';\nconst lanesOf = (client: ReturnType<typeof createClient>): LaneStore => new RedisLaneStore({ client, prefix: 'consumer' });\nconsole.log('ok ./redis', typeof lanesOf);" },
  './postgres': { peers: ['pg', '@types/pg'], program: "import pg from 'pg';\nimport { PostgresRunJournal, PostgresSnapshotStore } from 'agent-lanes/postgres';\nimport type { RunJournal, SnapshotStore } from 'agent-lanes';\nconst journalOf = (pool: pg.Pool): RunJournal => new PostgresRunJournal({ pool });\nconst storeOf = (pool: pg.Pool): SnapshotStore => new PostgresSnapshotStore({ pool });\nconsole.log('ok ./postgres', typeof journalOf, typeof storeOf);" },
  // The MCP SDK's own declarations name the DOM's `HeadersInit`, as the AI SDK's do.
  './mcp': { peers: ['@modelcontextprotocol/sdk'], dom: true, program: "import { Client } from '@modelcontextprotocol/sdk/client/index.js';\nimport { mcpTools, McpToolError } from 'agent-lanes/mcp';\nimport { ToolRegistry } from 'agent-lanes';\nconst client = new Client({ name: 'consumer', version: '1.0.0' });\nconst listed = (c: Client) => mcpTools(c, { prefix: 'files_' });\nconst registered = (c: Client) => new ToolRegistry().registerMcp(c);\nconsole.log('ok ./mcp', typeof listed, typeof registered, typeof McpToolError, typeof client.connect);" },
  './otel': { peers: ['@opentelemetry/api'], program: "import { trace } from '@opentelemetry/api';\nimport { Agent, AgentRunner, ScriptedProvider, ToolRegistry } from 'agent-lanes';\nimport { TracingAttributes, TracingEvents, LaneMetricNames } from 'agent-lanes/otel';\nconst runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'hi' }]), tools: new ToolRegistry(), tracer: trace.getTracer('consumer') });\nconst result = await runner.run(new Agent({ name: 'a', instructions: 'Greet.', model: 'scripted' }), 'hi');\nconsole.log('ok ./otel', result.status, typeof TracingAttributes, typeof TracingEvents, typeof LaneMetricNames);" },
  // The AI SDK's declarations read JSON Schema's types and the DOM's `HeadersInit`.
  './ai-sdk': {
    peers: ['ai', '@ai-sdk/provider', '@types/json-schema@^7'],
    dom: true,
    program: "import { MockLanguageModelV3 } from 'ai/test';\nimport { Agent, AgentRunner, ToolRegistry } from 'agent-lanes';\nimport { aiSdkProvider } from 'agent-lanes/ai-sdk';\nconst usage = { inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 2, text: 2, reasoning: 0 } };\nconst model = new MockLanguageModelV3({ doGenerate: async () => ({ content: [{ type: 'text', text: 'hi' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }) });\nconst runner = new AgentRunner({ provider: aiSdkProvider(model, { stream: false }), tools: new ToolRegistry() });\nconst result = await runner.run(new Agent({ name: 'a', instructions: 'Greet.', model: 'mock' }), 'hi');\nconsole.log('ok ./ai-sdk', result.status, result.output);",
  },
  // The Agents SDK's own declarations read the DOM's fetch types, as the AI SDK's do.
  './openai-agents': {
    peers: ['@openai/agents', 'zod'],
    dom: true,
    program:
      "import { RunContext, tool } from '@openai/agents';\nimport { z } from 'zod';\nimport { ConcurrencyConfig, ToolLanes } from 'agent-lanes';\nimport { laneContextOf, withLanes } from 'agent-lanes/openai-agents';\nconst lookup = tool({ name: 'lookup', description: 'Look up.', parameters: z.object({ q: z.string() }), execute: async ({ q }, _context, details) => `${q} for ${laneContextOf(details)?.tenant}` });\nconst toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });\nconst [wrapped] = withLanes([lookup], toolLanes, { tenant: 'acme' });\nconst out = await wrapped!.invoke(new RunContext(), JSON.stringify({ q: 'x' }), { toolCall: { type: 'function_call', callId: 'c1', name: 'lookup', arguments: '{}' } });\nconsole.log('ok ./openai-agents', out);",
  },
  './langchain': {
    peers: ['@langchain/core', 'zod'],
    program:
      "import { tool } from '@langchain/core/tools';\nimport { z } from 'zod';\nimport { ConcurrencyConfig, ToolLanes } from 'agent-lanes';\nimport { laneContextOf, withLanes } from 'agent-lanes/langchain';\nconst lookup = tool(async ({ q }, config) => `${q} for ${laneContextOf(config)?.tenant}`, { name: 'lookup', description: 'Look up.', schema: z.object({ q: z.string() }) });\nconst toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });\nconst [wrapped] = withLanes([lookup], toolLanes, { tenant: 'acme' });\nconst out = await wrapped!.invoke({ q: 'x' });\nconsole.log('ok ./langchain', out);",
  },
};

describe('the packed package, installed into a fresh project', function () {
  // Packing builds dist/, and the install goes to the registry: minutes at worst, about a minute usually.
  // The integrations' projects add an install each (side by side) and a compile each (one at a time).
  this.timeout(420_000);
  let temp: string;
  let app: string;
  let installed: string;
  let pkg: Manifest;
  // The compilers' verdicts, run side by side once the projects are written.
  let compiled: Record<'nodenext' | 'bundler' | 'cjsNode16' | 'docs' | 'aiSdk' | 'bare', Promise<Ran>>;
  // The project with no optional peer installed.
  let bare: string;
  // Each integration with peers: its project, with that entry's peers alone, and the compiler's verdict on its program.
  const entryProjects = new Map<string, { dir: string; compiled: Promise<Ran> }>();
  // The docs' pages as modules, by file name, to name a failing block's page and line.
  let pages: ReadonlyMap<string, import('../docs/pageProgram.js').PageModule>;

  before(async function () {
    temp = await mkdtemp(join(tmpdir(), 'agent-lanes-consumer-'));

    // A fresh clone: this checkout's files without dist/ or node_modules, with the dev tools linked in.
    const source = join(temp, 'source');
    await cp(ROOT, source, { recursive: true, filter: (from) => inAClone(relative(ROOT, from)) });
    await symlink(await realpath(join(ROOT, 'node_modules')), join(source, 'node_modules'), 'dir');
    const { name, version } = JSON.parse(await readFile(join(source, 'package.json'), 'utf8')) as Manifest;
    await run('npm', ['pack', '--pack-destination', temp], source, { env: npmEnv, timeoutMs: 180_000 });
    const tarball = join(temp, `${name}-${version}.tgz`);
    expect(await exists(tarball), `npm pack wrote ${tarball}`).to.equal(true);

    app = join(temp, 'app');
    await mkdir(app);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    bare = join(temp, 'bare');
    await mkdir(bare);
    await writeFile(join(bare, 'package.json'), JSON.stringify({ name: 'bare-consumer', private: true, type: 'module' }));
    // The package and what the docs' Install says to install beside it, nothing else: no optional peer.
    const bareInstall = run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, 'rxjs@^7.8', 'io-ts@^2.2', 'fp-ts@^2.16', '@types/node@^20'], bare, { env: npmEnv, timeoutMs: 240_000 });
    bareInstall.catch(() => {});
    // An integration's own project: the package, its required peers, and that entry's optional peers.
    const devRanges = (JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies;
    const entryInstalls: Array<Promise<unknown>> = [];
    for (const [entry, { peers }] of Object.entries(ENTRY_PROGRAMS)) {
      if (peers.length === 0) continue;
      const dir = join(temp, `entry-${entry.slice(2)}`);
      await mkdir(dir);
      await writeFile(join(dir, 'package.json'), JSON.stringify({ name: `entry-${entry.slice(2)}-consumer`, private: true, type: 'module' }));
      const installing = run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, 'rxjs@^7.8', 'io-ts@^2.2', 'fp-ts@^2.16', '@types/node@^20', ...peers.map((peer) => (nameOf(peer) === peer ? `${peer}@${devRanges[peer]}` : peer))], dir, { env: npmEnv, timeoutMs: 240_000 });
      installing.catch(() => {});
      entryInstalls.push(installing);
      entryProjects.set(entry, { dir, compiled: Promise.resolve({ stdout: '', stderr: '' }) });
    }
    try {
      // The optional peers and packages the docs' blocks import, at the ranges this checkout tests with.
      const dev = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
      const docsPackages = ['ai', '@ai-sdk/provider', '@ai-sdk/openai', '@ai-sdk/google', '@modelcontextprotocol/sdk', '@opentelemetry/api', 'redis', 'chai', '@types/chai', '@openai/agents', '@langchain/core', '@langchain/langgraph', 'zod'].map((name) => `${name}@${dev.devDependencies[name]}`);
      // The AI SDK's own declarations read JSON Schema's types (@types/json-schema) and the DOM's `HeadersInit`.
      await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, 'rxjs@^7.8', 'io-ts@^2.2', 'fp-ts@^2.16', '@types/node@^20', '@types/json-schema@^7', ...docsPackages], app, {
        env: npmEnv,
        timeoutMs: 240_000,
      });
    } catch (error) {
      throw new Error(
        `npm install of the packed package and its peers failed. This spec installs them from the package registry (${REGISTRY}): is it reachable?\n${(error as Error).message}`,
      );
    }
    try {
      await bareInstall;
      await Promise.all(entryInstalls);
    } catch (error) {
      throw new Error(`npm install of the packed package alone, or with one integration's peers, failed (${REGISTRY}):\n${(error as Error).message}`);
    }
    installed = join(app, 'node_modules', name);
    pkg = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as Manifest;

    // ESM TypeScript: the getting-started program and the marble test of docs/testing.md, as written there.
    const esm = join(app, 'esm');
    await mkdir(esm);
    const gettingStarted = await readFile(join(installed, 'docs', 'getting-started.md'), 'utf8');
    const testing = await readFile(join(installed, 'docs', 'testing.md'), 'utf8');
    await writeFile(join(esm, 'check.ts'), codeAfter(gettingStarted, '### Check the install', 'docs/getting-started.md'));
    // The marble test, with the two globals a test runner would give it.
    const runner = [
      "import { deepStrictEqual } from 'node:assert';",
      'const expect = (actual: unknown) => ({ to: { deep: { equal: (expected: unknown) => deepStrictEqual(actual, expected) } } });',
      'const it = (title: string, body: () => void): void => { body(); console.log(`ok - ${title}`); };',
    ].join('\n');
    await writeFile(join(esm, 'marble.ts'), `${runner}\n${codeAfter(testing, '## Marble-testing your own tools against the lanes', 'docs/testing.md')}\n`);
    const strict = { target: 'ES2022', strict: true, skipLibCheck: false, types: ['node'], lib: ['ES2022'] };
    // The AI SDK entry, with the SDK's own mock model, in a project of its own: the SDK's
    // declarations need the DOM's types, which the other programs here do without.
    const aiSdk = join(app, 'aisdk');
    await mkdir(aiSdk);
    await writeFile(
      join(aiSdk, 'main.ts'),
      [
        "import { generateText, jsonSchema, stepCountIs, tool } from 'ai';",
        "import { MockLanguageModelV3 } from 'ai/test';",
        "import { Agent, AgentRunner, ConcurrencyConfig, ToolLanes, ToolRegistry } from 'agent-lanes';",
        "import { aiSdkProvider, withLanes, type AiSdkProviderOptions } from 'agent-lanes/ai-sdk';",
        'const usage = { inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 2, text: 2, reasoning: 0 } };',
        "const model = new MockLanguageModelV3({ doGenerate: async () => ({ content: [{ type: 'text', text: 'hello through the AI SDK' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }) });",
        'const options: AiSdkProviderOptions = { stream: false };',
        'const runner = new AgentRunner({ provider: aiSdkProvider(model, options), tools: new ToolRegistry() });',
        "const result = await runner.run(new Agent({ name: 'planner', instructions: 'Greet.', model: 'mock' }), 'hi');",
        'console.log(result.status, result.output);',
        // The SDK's own loop, its tools wrapped: the ToolSet's type is kept, so generateText takes it and types its result.
        "const tools = { search: tool({ inputSchema: jsonSchema<{ q: string }>({ type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }), execute: async ({ q }) => `hits for ${q}` }) };",
        'const wrapped: typeof tools = withLanes(tools, new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 1 } }) }), { tenant: \'acme\', idempotent: { search: true } });',
        "let step = 0;",
        "const caller = new MockLanguageModelV3({ doGenerate: async () => (step++ === 0 ? { content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'search', input: '{\"q\":\"Lisbon\"}' }], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] } : { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }) });",
        "const { steps } = await generateText({ model: caller, tools: wrapped, prompt: 'hotels', stopWhen: stepCountIs(2) });",
        "const results = steps[0]!.toolResults.map((part) => String(part.output));",
        'console.log(results.join());',
      ].join('\n'),
    );
    await writeFile(join(aiSdk, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...strict, lib: ['ES2022', 'DOM'], module: 'nodenext', moduleResolution: 'nodenext' }, include: ['*.ts'] }));
    // The docs' blocks, a module per page, with the names they may use unintroduced.
    const docs = join(app, 'docs');
    await mkdir(docs);
    pages = docPages(installed, libraryOf(ROOT).names).pages;
    for (const [name, page] of pages) await writeFile(join(docs, name), page.text);
    await writeFile(join(docs, 'context.d.ts'), blockGlobals(ROOT));
    await writeFile(join(docs, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', strict: true, skipLibCheck: true, types: ['node'], lib: ['ES2022'], module: 'nodenext', moduleResolution: 'nodenext', noEmit: true }, include: ['*.ts'] }));
    // A library error, thrown to read its stack with source maps on.
    await writeFile(join(esm, 'stack.ts'), "import { ConcurrencyConfig } from 'agent-lanes';\ntry {\n  new ConcurrencyConfig({ maxConcurrentTools: 0 });\n} catch (error) {\n  console.log((error as Error).stack);\n}\n");
    await writeFile(join(esm, 'tsconfig.bundler.json'), JSON.stringify({ compilerOptions: { ...strict, module: 'preserve', moduleResolution: 'bundler', noEmit: true }, include: ['*.ts'] }));

    // No optional peer: the README's first run and the getting-started program, as written.
    const readme = await readFile(join(installed, 'README.md'), 'utf8');
    await writeFile(join(bare, 'first-run.ts'), codeAfter(readme, '## A first run', 'README.md'));
    await writeFile(join(bare, 'check.ts'), codeAfter(gettingStarted, '### Check the install', 'docs/getting-started.md'));
    // Every entry but the AI SDK's names no optional peer in its types: each compiles and loads here, where none is installed.
    const peerless = Object.keys(pkg.exports).filter((entry) => entry !== './package.json' && entry !== './ai-sdk');
    await writeFile(
      join(bare, 'entries.ts'),
      [...peerless.map((entry, i) => `import * as entry${i} from '${pkg.name}${entry.slice(1)}';`), `console.log([${peerless.map((_, i) => `entry${i}`).join(', ')}].map((m) => Object.keys(m).length > 0).join(' '));`].join('\n'),
    );
    for (const [entry, { program, dom }] of Object.entries(ENTRY_PROGRAMS)) {
      const project = entryProjects.get(entry);
      await writeFile(join(project?.dir ?? bare, project === undefined ? `entry-${entry === '.' ? 'main' : entry.slice(2)}.ts` : 'main.ts'), `${program}\n`);
      const lib = dom === true ? ['ES2022', 'DOM'] : strict.lib;
      if (project !== undefined) await writeFile(join(project.dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...strict, lib, module: 'nodenext', moduleResolution: 'nodenext' }, include: ['*.ts'] }));
    }
    await writeFile(join(bare, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...strict, module: 'nodenext', moduleResolution: 'nodenext' }, include: ['*.ts'] }));

    // CommonJS: plain require, and TypeScript compiled to CommonJS.
    const cjs = join(app, 'cjs');
    await mkdir(cjs);
    await writeFile(join(cjs, 'package.json'), JSON.stringify({ type: 'commonjs' }));
    const cjsProgram = (types: boolean) =>
      [
        types ? "import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type RunResult } from 'agent-lanes';" : "const { Agent, AgentRunner, ScriptedProvider, ToolRegistry } = require('agent-lanes');",
        "const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'hello from CommonJS' }]), tools: new ToolRegistry() });",
        "runner.run(new Agent({ name: 'planner', instructions: 'Greet.', model: 'scripted' }), 'hi')",
        `  .then((result${types ? ': RunResult' : ''}) => console.log(result.status, result.output, typeof require));`,
      ].join('\n');
    await writeFile(join(cjs, 'main.cjs'), cjsProgram(false));
    await writeFile(join(cjs, 'main.ts'), cjsProgram(true));
    // Only the verdict on main.ts matters here, so the library's types are not checked again.
    await writeFile(join(cjs, 'tsconfig.node16.json'), JSON.stringify({ compilerOptions: { ...strict, skipLibCheck: true, module: 'node16', moduleResolution: 'node16', noEmit: true }, files: ['main.ts'] }));
    // One nodenext program for both: each file is ESM or CommonJS by its folder's package.json,
    // and is emitted beside its source, where that package.json still says which it is.
    await writeFile(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...strict, module: 'nodenext', moduleResolution: 'nodenext' }, include: ['esm/*.ts', 'cjs/*.ts'] }));

    const settled = <T>(promise: Promise<T>): Promise<T> => {
      // Awaited by the tests; a rejection before then is not unhandled.
      promise.catch(() => {});
      return promise;
    };
    compiled = {
      nodenext: settled(tsc(join(app, 'tsconfig.json'))),
      bundler: settled(tsc(join(esm, 'tsconfig.bundler.json'))),
      cjsNode16: settled(tsc(join(cjs, 'tsconfig.node16.json'))),
      docs: settled(tsc(join(docs, 'tsconfig.json'))),
      aiSdk: settled(tsc(join(aiSdk, 'tsconfig.json'))),
      bare: settled(tsc(join(bare, 'tsconfig.json'))),
    };
    await Promise.allSettled(Object.values(compiled));
    // The integrations' projects after those, one at a time.
    for (const project of entryProjects.values()) {
      project.compiled = settled(tsc(join(project.dir, 'tsconfig.json')));
      await project.compiled.catch(() => {});
    }
  });

  after(async () => {
    if (temp !== undefined) await rm(temp, { recursive: true, force: true });
  });

  it('was built by its prepare script, from a clone without dist/', async () => {
    expect(pkg.scripts?.['prepare']).to.be.a('string');
    for (const file of ['dist/index.js', 'dist/index.d.ts']) expect(await exists(join(installed, file)), file).to.equal(true);
  });

  it('declares rxjs ^7.8 as a peer (not a dependency), and the project has one copy of it', async () => {
    expect(pkg.peerDependencies).to.have.property('rxjs', '^7.8');
    // Every other peer is an integration's, optional: the core installs without any of them.
    for (const peer of Object.keys(pkg.peerDependencies ?? {}).filter((name) => name !== 'rxjs')) {
      expect(pkg.peerDependenciesMeta?.[peer]?.optional, `${peer} is optional`).to.equal(true);
    }
    expect(pkg.dependencies).not.to.have.property('rxjs');
    expect(await exists(join(installed, 'node_modules', 'rxjs'))).to.equal(false);
    expect(createRequire(join(installed, 'dist', 'index.js')).resolve('rxjs')).to.equal(createRequire(join(app, 'x.js')).resolve('rxjs'));
  });

  it('ships a LICENSE (MIT), a CHANGELOG with this version, and says where it comes from', async () => {
    expect(pkg.license).to.equal('MIT');
    expect(await readFile(join(installed, 'LICENSE'), 'utf8')).to.match(/^MIT License\n/);
    expect(await readFile(join(installed, 'CHANGELOG.md'), 'utf8')).to.include(`\n## ${pkg.version}`);
    expect(pkg.keywords).to.include('rxjs');
    expect(pkg.sideEffects).to.equal(false);
  });

  it('ships every file its README and docs link to, and every heading they link to', async () => {
    const documents = (await filesUnder(installed)).filter((file) => file.endsWith('.md') && !relative(installed, file).split(sep).includes('node_modules'));
    expect(documents.map((file) => relative(installed, file))).to.include.members(['README.md', 'CHANGELOG.md', join('docs', 'getting-started.md')]);
    const broken: string[] = [];
    let links = 0;
    for (const document of documents) {
      const text = await readFile(document, 'utf8');
      for (const [, target] of withoutCode(text).matchAll(/!?\[[^\]]*\]\(([^)\s]+)[^)]*\)/g)) {
        if (/^[a-z]+:/i.test(target!)) continue;
        links++;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const file = path === '' ? document : resolve(dirname(document), path);
        const where = `${relative(installed, document)} -> ${target}`;
        if (relative(installed, file).startsWith('..') || !(await exists(file))) broken.push(`${where}: no such file in the package`);
        else if (anchor !== undefined && !anchorsOf(await readFile(file, 'utf8')).has(anchor)) broken.push(`${where}: no such heading`);
      }
    }
    expect(links).to.be.above(10);
    expect(broken).to.deep.equal([]);
  });

  it('ships the sources its source maps name, and a stack trace names them', async () => {
    const maps = (await filesUnder(join(installed, 'dist'))).filter((file) => file.endsWith('.map'));
    expect(maps.length).to.be.above(50);
    const missing: string[] = [];
    for (const map of maps) {
      const { sources, sourceRoot = '' } = JSON.parse(await readFile(map, 'utf8')) as { sources: string[]; sourceRoot?: string };
      for (const source of sources) {
        if (!(await exists(resolve(dirname(map), sourceRoot, source)))) missing.push(`${relative(installed, map)}: ${source}`);
      }
    }
    expect(missing).to.deep.equal([]);
    await compiled.nodenext;
    const { stdout } = await node(['--enable-source-maps', 'stack.js'], join(app, 'esm'));
    const frame = /\((\/[^()]*\/node_modules\/agent-lanes\/lib\/[^():]+\.ts):\d+:\d+\)/.exec(stdout);
    expect(frame, stdout).to.not.equal(null);
    expect(await exists(frame![1]!), frame![1]).to.equal(true);
  });

  it('compiles the getting-started program under nodenext and bundler with skipLibCheck off, and runs it as documented', async () => {
    await compiled.nodenext;
    await compiled.bundler;
    const program = await readFile(join(app, 'esm', 'check.ts'), 'utf8');
    const documented = /\/\/ (.*)\s*$/.exec(program)![1];
    const { stdout } = await node(['check.js'], join(app, 'esm'));
    expect(stdout.trim()).to.equal(documented);
  });

  it('compiles the README\'s first run and the getting-started program with skipLibCheck off in a project with no optional peer, and runs them as documented', async () => {
    const peers = Object.keys(pkg.peerDependencies ?? {}).filter((peer) => pkg.peerDependenciesMeta?.[peer]?.optional === true);
    expect(peers).to.include.members(['@opentelemetry/api', 'pg', 'redis', 'ioredis', '@modelcontextprotocol/sdk', 'ai', '@ai-sdk/provider', 'zod', 'valibot', 'arktype', '@standard-schema/spec']);
    const present: string[] = [];
    for (const peer of peers) if (await exists(join(bare, 'node_modules', peer))) present.push(peer);
    expect(present, 'optional peers installed').to.deep.equal([]);
    const verdict = await compiled.bare.then(
      () => 'compiled',
      (e: unknown) => (e as Error).message,
    );
    expect(verdict).to.equal('compiled');
    for (const program of ['first-run', 'check']) {
      const documented = /\/\/ (.*)\s*$/.exec(await readFile(join(bare, `${program}.ts`), 'utf8'))![1];
      expect((await node([`${program}.js`], bare)).stdout.trim(), program).to.equal(documented);
    }
  });

  it('compiles every entry but the AI SDK\'s, skipLibCheck off, with no optional peer installed, and loads each', async () => {
    await compiled.bare.catch((e: unknown) => expect.fail((e as Error).message));
    const peerless = Object.keys(pkg.exports).filter((entry) => entry !== './package.json' && entry !== './ai-sdk');
    // A program for every entry of the exports map.
    expect(Object.keys(ENTRY_PROGRAMS)).to.have.members(Object.keys(pkg.exports).filter((entry) => entry !== './package.json'));
    expect((await node(['entries.js'], bare)).stdout.trim()).to.equal(peerless.map(() => 'true').join(' '));
    for (const entry of Object.keys(ENTRY_PROGRAMS).filter((name) => !entryProjects.has(name))) {
      const { stdout } = await node([`entry-${entry === '.' ? 'main' : entry.slice(2)}.js`], bare);
      expect(stdout.trim().startsWith(`ok ${entry} `), stdout).to.equal(true);
    }
  });

  for (const [entry, { peers }] of Object.entries(ENTRY_PROGRAMS).filter(([, { peers }]) => peers.length > 0)) {
    it(`compiles a program through agent-lanes${entry.slice(1)} with only its peers installed (${peers.map(nameOf).join(', ')}), skipLibCheck off, and runs it`, async () => {
      const project = entryProjects.get(entry)!;
      const optional = Object.keys(pkg.peerDependencies ?? {}).filter((peer) => pkg.peerDependenciesMeta?.[peer]?.optional === true);
      const present: string[] = [];
      for (const peer of optional) if (await exists(join(project.dir, 'node_modules', peer))) present.push(peer);
      // Besides the entry's peers, only what they bring themselves, as dependencies or peers of
      // their own, however deep (the MCP SDK brings zod; the AI SDK, zod and @standard-schema/spec).
      const brought = new Set<string>();
      const todo = peers.map(nameOf);
      while (todo.length > 0) {
        const name = todo.pop()!;
        const file = join(project.dir, 'node_modules', name, 'package.json');
        if (brought.has(name) || !(await exists(file))) continue;
        brought.add(name);
        const manifest = JSON.parse(await readFile(file, 'utf8')) as { dependencies?: Record<string, string>; peerDependencies?: Record<string, string> };
        todo.push(...Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies }));
      }
      expect(present.filter((peer) => !brought.has(peer)), 'optional peers installed that the entry did not ask for').to.deep.equal([]);
      expect(present, 'the entry\'s peers installed').to.include.members(peers.map(nameOf).filter((peer) => optional.includes(peer)));
      await project.compiled.catch((e: unknown) => expect.fail((e as Error).message));
      const { stdout } = await node(['main.js'], project.dir);
      expect(stdout.trim().startsWith(`ok ${entry} `), stdout).to.equal(true);
    });
  }

  it('runs the agent-lanes/ai-sdk entry with the AI SDK\'s mock model (a runner\'s provider, and withLanes under generateText), compiled under nodenext with skipLibCheck off', async () => {
    await compiled.aiSdk;
    expect((await node(['main.js'], join(app, 'aisdk'))).stdout.trim()).to.equal('completed hello through the AI SDK\nhits for Lisbon');
  });

  it('compiles every ```ts block of the README and docs/ against the installed package', async () => {
    expect(pages.size).to.be.above(5);
    const error = await compiled.docs.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    // tsc prints `docs_streaming_md.ts(88,5): error TS...`: named back as the page and line.
    const problems = [...(error?.message ?? '').matchAll(/^(\S+\.ts)\((\d+),\d+\): (error .*)$/gm)].map(([, file, line, message]) => {
      const page = pages.get(file!);
      return `${page === undefined ? file : whereIn(page, Number(line) - 1)}: ${message}`;
    });
    expect(problems).to.deep.equal([]);
    expect(error, error?.message).to.equal(undefined);
  });

  it('is required from CommonJS, plain and as TypeScript compiled under nodenext', async () => {
    expect((await node(['main.cjs'], join(app, 'cjs'))).stdout.trim()).to.equal('completed hello from CommonJS function');
    await compiled.nodenext;
    expect((await node(['main.js'], join(app, 'cjs'))).stdout.trim()).to.equal('completed hello from CommonJS function');
  });

  it('refuses CommonJS TypeScript under node16 at compile time, where require of ESM is not known', async () => {
    const error = await compiled.cjsNode16.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).to.include('TS1479');
  });

  it('runs the marble test of docs/testing.md in virtual time, through the installed package and the project rxjs', async () => {
    await compiled.nodenext;
    const { stdout } = await node(['marble.js'], join(app, 'esm'));
    expect(stdout).to.match(/^ok - runs two lookups at a time/m);
  });

  it('still runs it in virtual time with a second copy of rxjs beside the library (a linked folder), since it passes its scheduler', async () => {
    await compiled.nodenext;
    const nested = join(installed, 'node_modules', 'rxjs');
    // What Node loads of rxjs (its package.json and CommonJS build, under the `node` condition) is enough of a copy.
    const rxjs = join(app, 'node_modules', 'rxjs');
    const loaded = (from: string): boolean => {
      const path = relative(rxjs, from);
      return path === '' || path === 'package.json' || path === 'dist' || (path.startsWith(join('dist', 'cjs')) && !path.endsWith('.map'));
    };
    await cp(rxjs, nested, { recursive: true, filter: loaded });
    try {
      // The library now loads its own copy, whose asyncScheduler the test's TestScheduler does not drive.
      expect(createRequire(join(installed, 'dist', 'index.js')).resolve('rxjs')).to.include(nested);
      const { stdout } = await node(['marble.js'], join(app, 'esm'));
      expect(stdout).to.match(/^ok - runs two lookups at a time/m);
    } finally {
      await rm(join(installed, 'node_modules'), { recursive: true, force: true });
    }
  });
});
