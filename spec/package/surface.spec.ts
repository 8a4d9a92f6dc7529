// What each entry of the package exports. The main entry is what a user writes (agents, the
// runner, tools, configs, events, errors, the batch's stages) and stays small enough to hold;
// each integration's names come from its own entry; nothing internal comes from any entry. The
// names are read with TypeScript's own checker from the sources the exports map is built from,
// and every entry is built (emitted in memory, as `npm run build` emits it) to the files its
// exports map names.
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The most names the main entry may export. */
const MAIN_AT_MOST = 120;

/** Names of the library's inside: each is the machinery of a stage, a wire or a codec, never a user's to write. */
const INTERNAL = [
  'BatchScope',
  'BatchScopeOptions',
  'CallRecord',
  'CallState',
  'CallNews',
  'CallLanes',
  'CallBody',
  'LaneEntry',
  'Stage',
  'staged',
  'serial',
  'mergeDeltas',
  'assignDelta',
  'postJson',
  'postForStream',
  'streamedReply',
  'retryableFlag',
  'abortableSleep',
  'JsonPost',
  'EventDecoder',
  'UsageCodec',
  'ModelResponseCodec',
  'FinishReasonCodec',
  'decodeModelResponse',
  'decodeToolCall',
  'toOutcomeEvent',
  'toResponseEvent',
  'WrittenTurn',
  'keepShape',
  'keepShapes',
  'LoopMonitor',
  'toErrorInfo',
  'jsonForm',
  'isStandardSchema',
  'LanePermit',
  'Loan',
  'RatedStore',
];

/** Names that live on an integration's entry, and not on the main one. */
const INTEGRATIONS: Readonly<Record<string, readonly string[]>> = {
  './redis': ['RedisLaneStore', 'RedisLaneStoreOptions', 'redisConnection', 'ioredisConnection', 'nodeRedisConnection'],
  './postgres': ['PostgresRunJournal', 'PostgresSnapshotStore', 'PostgresRunJournalOptions', 'PgPoolLike'],
  './mcp': ['mcpTools', 'McpClient', 'McpToolsOptions', 'McpToolError', 'McpConnectionLostError'],
  './otel': ['TracerLike', 'TracingAttributes', 'TracingEvents', 'LaneMetricNames', 'LaneMeter'],
  './testing': ['CassetteRecorder', 'CassetteReplay', 'parseCassette', 'stringifyCassette', 'deterministicTranscript', 'fingerprint'],
  './providers': ['OpenAIChatProvider', 'AnthropicMessagesProvider', 'retryPolicy', 'ProviderHttpError'],
  './streaming': ['toAsyncIterable', 'sseHandler', 'toUIMessageStream', 'uiMessageStreamHandler', 'resumeApproved'],
  './ai-sdk': ['aiSdkProvider', 'fromUIMessages', 'withLanes', 'laneContextOf'],
  './openai-agents': ['withLanes', 'laneContextOf', 'WithLanesOptions'],
  './langchain': ['withLanes', 'laneContextOf', 'WithLanesOptions'],
};

/** Names on an integration's entry that the main entry keeps as well. */
const ALSO_MAIN = new Set(['ScriptedProvider', 'Script', 'ScriptStep']);

/** The public contract's names that stay on the main entry (DESIGN.md), the batch's seven stages among them. */
const MAIN = [
  'ConcurrencyConfig', 'DeadlineConfig', 'ToolRegistry', 'Agent', 'OnToolError', 'AgentRunner', 'ScriptedProvider', 'WorkerPool',
  'ConfigError', 'ToolTimedOutError', 'EventLoopStalledError', 'WorkerPoolFullError', 'DeadlineExceededError', 'UnknownToolError',
  'ToolArgumentsError', 'RateLimitedError', 'BudgetExceededError', 'RunEventType', 'RunEvent', 'RunResult', 'ModelProvider',
  'ModelRequest', 'ModelResponse', 'ModelStreamPart', 'Message', 'ToolDeclaration', 'ToolContext', 'ToolSpec', 'LaneStore',
  'LaneTable', 'runBatch', 'phases', 'gate', 'inLanes', 'ceiling', 'untilStopped', 'inCallOrder', 'settle', 'BatchCall', 'Outcome',
  'stopClassOf', 'RunJournal', 'InMemoryRunJournal', 'ToolLanes',
];

interface Manifest {
  readonly name: string;
  readonly exports: Readonly<Record<string, string | { readonly types?: string; readonly import?: string; readonly require?: string; readonly default?: string }>>;
}

const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Manifest;

/** Each entry that loads code, with the built files it names and the source they are built from. */
const entries = Object.entries(manifest.exports).flatMap(([entry, target]) => {
  if (typeof target === 'string') return [];
  const built = [target.types, target.import, target.require, target.default].filter((file): file is string => file !== undefined);
  return [{ entry, built, source: join(ROOT, target.import!.replace(/^\.\/dist\//, 'lib/').replace(/\.js$/, '.ts')) }];
});

function buildOptions(): ts.CompilerOptions {
  const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.build.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  return { ...config!.options, declarationMap: false, sourceMap: false };
}

describe('the names each entry of the package exports', function () {
  // The whole library is checked and emitted once, in memory.
  this.timeout(180_000);
  let program: ts.Program;
  const exported = new Map<string, string[]>();

  before(() => {
    for (const { entry, source } of entries) expect(existsSync(source), `${entry}'s source ${relative(ROOT, source)}`).to.equal(true);
    program = ts.createProgram(entries.map(({ source }) => source), buildOptions());
    const checker = program.getTypeChecker();
    for (const { entry, source } of entries) {
      const module = checker.getSymbolAtLocation(program.getSourceFile(source)!);
      exported.set(entry, module === undefined ? [] : checker.getExportsOfModule(module).map((symbol) => symbol.name));
    }
  });

  it(`keeps the main entry to at most ${MAIN_AT_MOST} names`, () => {
    const names = exported.get('.')!;
    expect(names.length, names.join(', ')).to.be.at.most(MAIN_AT_MOST);
  });

  it('builds every entry to the files its exports map names', () => {
    const written = new Set<string>();
    const result = program.emit(undefined, (file) => written.add(relative(join(ROOT, 'dist'), file)));
    const problems = ts.getPreEmitDiagnostics(program).concat(result.diagnostics).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
    expect(problems).to.deep.equal([]);
    const missing = entries.flatMap(({ entry, built }) => built.filter((file) => !written.has(file.replace(/^\.\/dist\//, ''))).map((file) => `${entry}: ${file}`));
    expect(missing).to.deep.equal([]);
  });

  it('exports nothing internal from any entry', () => {
    const found = [...exported].flatMap(([entry, names]) => names.filter((name) => INTERNAL.includes(name)).map((name) => `${entry}: ${name}`));
    expect(found).to.deep.equal([]);
  });

  it("gives each integration's names from its own entry, not from the main one", () => {
    expect(Object.keys(INTEGRATIONS)).to.have.members(entries.map(({ entry }) => entry).filter((entry) => entry !== '.'));
    const main = new Set(exported.get('.'));
    for (const [entry, names] of Object.entries(INTEGRATIONS)) {
      expect(exported.get(entry), entry).to.include.members(names);
      const alsoInMain = exported.get(entry)!.filter((name) => main.has(name) && !ALSO_MAIN.has(name));
      expect(alsoInMain, `${entry}'s names also on the main entry`).to.deep.equal([]);
    }
  });

  it("keeps the public contract's names on the main entry", () => {
    expect(exported.get('.')).to.include.members(MAIN);
  });
});
