// How far one call travels: the files of lib/ it crosses from runner.run() to its body and back,
// and the calls from one file into another along the way, counted from what actually ran, not
// from reading. A run of one turn with one call (all three lanes declared, a body answering at
// once) is run twice; the second run is measured with V8's precise coverage (which functions ran),
// and each function that ran is found in the TypeScript source, where every call it makes is
// resolved with the type checker: a call into another file of lib/ whose target also ran is one
// cross-file call (each caller-callee pair once). docs/architecture.md quotes the figures.
// Run it with `node --import tsx bench/callPath.ts [lib folder]` (default: this checkout's lib/).
import { findSourceMap } from 'node:module';
import { Session } from 'node:inspector/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const given = process.argv.slice(2).find((arg) => !arg.startsWith('--'));
const root = resolve(given ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'lib'));
const lib = (await import(pathToFileURL(join(root, 'index.ts')).href)) as typeof import('../lib/index.js');
const { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolRegistry } = lib;

// The runner and its agent are made once, before anything is measured: only run() is.
const tools = new ToolRegistry().register({ name: 'lookup', description: 'looks up' }, () => 'found');
const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 4, perTool: { lookup: 2 }, perTenant: 8 });
const provider = new ScriptedProvider([
  { toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{}' }] },
  { text: 'done' },
  { toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{}' }] },
  { text: 'done' },
]);
const runner = new AgentRunner({ provider, tools, concurrency });
const agent = new Agent({ name: 'a', instructions: 'i', model: 'm' });

async function oneCall(): Promise<void> {
  const result = await runner.run(agent, 'go');
  if (result.status !== 'completed') throw new Error(`callPath: the run ${result.status}`);
}

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
await oneCall();
// Taking the coverage resets the counts: what the second run makes is the run's alone.
await session.post('Profiler.takePreciseCoverage');
await oneCall();
const { result } = await session.post('Profiler.takePreciseCoverage');
await session.post('Profiler.stopPreciseCoverage');

// The functions that ran, as positions in the TypeScript source of lib/: file -> set of "line:col".
const ran = new Map<string, Set<string>>();
let unmapped = 0;
for (const script of result) {
  if (!script.url.startsWith('file://')) continue;
  const file = fileURLToPath(script.url);
  if (!file.startsWith(root + '/') || !file.endsWith('.ts')) continue;
  const map = findSourceMap(file);
  const { scriptSource } = await session.post('Debugger.getScriptSource', { scriptId: script.scriptId }).catch(async () => {
    await session.post('Debugger.enable');
    return session.post('Debugger.getScriptSource', { scriptId: script.scriptId });
  });
  const lineStarts = [0];
  for (let i = 0; i < scriptSource.length; i++) if (scriptSource[i] === '\n') lineStarts.push(i + 1);
  const at = (offset: number): { line: number; column: number } => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo, column: offset - lineStarts[lo]! };
  };
  for (const fn of script.functions) {
    const range = fn.ranges[0]!;
    if (range.count === 0 || fn.functionName === '' && range.startOffset === 0) continue;
    const { line, column } = at(range.startOffset);
    const entry = map?.findEntry(line, column);
    const original = entry !== undefined && 'originalLine' in entry ? { line: entry.originalLine, column: entry.originalColumn } : { line, column };
    const set = ran.get(file) ?? new Set<string>();
    set.add(`${original.line}:${original.column}`);
    ran.set(file, set);
  }
}
session.disconnect();

// The TypeScript program of lib/, to find each function that ran and resolve its calls.
const configPath = ts.findConfigFile(root, ts.sys.fileExists, 'tsconfig.json')!;
const config = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined })!;
const program = ts.createProgram(config.fileNames.filter((name) => resolve(name).startsWith(root + '/')), config.options);
const checker = program.getTypeChecker();

type Fn = ts.FunctionLikeDeclaration;
const isFn = (node: ts.Node): node is Fn => ts.isFunctionLike(node) && 'body' in node && (node as Fn).body !== undefined;

// The functions of a file that ran: the innermost function-like node starting on each position's line.
function ranIn(source: ts.SourceFile, positions: ReadonlySet<string>): Set<Fn> {
  const lines = new Set([...positions].map((position) => Number(position.split(':')[0])));
  const found = new Set<Fn>();
  const visit = (node: ts.Node): void => {
    if (isFn(node)) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const nameLine = source.getLineAndCharacterOfPosition((node.name ?? node).getStart(source)).line;
      if (lines.has(start) || lines.has(nameLine)) found.add(node);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const ranFns = new Set<Fn>();
const files = new Set<string>();
for (const [file, positions] of ran) {
  const source = program.getSourceFile(file);
  if (source === undefined) continue;
  const fns = ranIn(source, positions);
  if (fns.size === 0) continue;
  files.add(relative(root, file));
  for (const fn of fns) ranFns.add(fn);
}

// The declaration a call goes to, through aliases (imports, re-exports).
function target(call: ts.CallExpression | ts.NewExpression): ts.Declaration | undefined {
  const signature = checker.getResolvedSignature(call);
  return signature?.getDeclaration() ?? undefined;
}

const edges = new Set<string>();
for (const fn of ranFns) {
  const from = fn.getSourceFile();
  const visit = (node: ts.Node): void => {
    // A function inside this one is its own caller (if it ran).
    if (node !== fn && isFn(node)) return;
    if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
      const declaration = target(node);
      const to = declaration?.getSourceFile();
      if (declaration !== undefined && to !== undefined && to !== from && resolve(to.fileName).startsWith(root + '/') && isFn(declaration) && ranFns.has(declaration)) {
        edges.add(`${relative(root, from.fileName)}:${from.getLineAndCharacterOfPosition(fn.getStart(from)).line} -> ${relative(root, to.fileName)}:${to.getLineAndCharacterOfPosition(declaration.getStart(to)).line}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(fn);
}

const inBatch = (file: string): boolean => file.startsWith('batch/');
const batchEdges = [...edges].filter((edge) => edge.split(' -> ').every((end) => inBatch(end)));
console.log(JSON.stringify({ unmapped, files: files.size, crossFileCalls: edges.size, batchFiles: [...files].filter(inBatch).length, batchCrossFileCalls: batchEdges.length }));
if (process.argv.includes('--list')) console.log([...files].sort().join('\n'));
if (process.argv.includes('--edges')) console.log([...edges].sort().join('\n'));
