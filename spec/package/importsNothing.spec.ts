// The package says `"sideEffects": false`: importing it starts nothing. Each entry of
// package.json's exports (its TypeScript source, through tsx) is imported in a fresh process
// that watches, from Node's side, what the import did: the resources the process holds open
// before and after, every timer and immediate created meanwhile (even one cleared at once), every
// asynchronous context entered or async hook enabled meanwhile, and what of the library's own
// classes is alive once the import is over (an object kept, a batch left subscribed).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = new URL('../../', import.meta.url);

interface ExportEntry {
  readonly import?: string;
}

/** The source of every entry a consumer can import (`./dist/x.js` is built from `lib/x.ts`). */
function entries(): string[] {
  const manifest = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { exports: Record<string, ExportEntry | string> };
  return Object.values(manifest.exports)
    .flatMap((entry) => (typeof entry === 'object' && entry.import !== undefined ? [entry.import] : []))
    .map((built) => {
      expect(built).to.match(/^\.\/dist\/.*\.js$/);
      return new URL(built.replace(/^\.\/dist\//, 'lib/').replace(/\.js$/, '.ts'), ROOT).href;
    });
}

interface Seen {
  /** Timers and immediates created during the import (an async hook's `init`), by type. */
  readonly timers: readonly string[];
  /** `AsyncLocalStorage` runs and entries, and async hooks enabled, during the import. */
  readonly contexts: readonly string[];
  readonly resourcesBefore: readonly string[];
  readonly resourcesAfter: readonly string[];
  /** Symbols a Promise made after the import carries: a storage left on puts its own there. */
  readonly promiseSymbols: readonly string[];
  /** Live objects of each class the entries export, after a full collection (only those with some). */
  readonly alive: Readonly<Record<string, number>>;
}

// Runs in the child: watches from before the first import to after the last.
const probe = `
import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import { queryObjects } from 'node:v8';
const urls = JSON.parse(process.argv[1]);
const timers = [];
const contexts = [];
const watch = createHook({ init(_id, type) { if (type === 'Timeout' || type === 'Immediate') timers.push(type); } });
const Hook = Object.getPrototypeOf(watch);
const counted = (target, name) => {
  const real = target[name];
  target[name] = function (...args) { if (this !== watch) contexts.push(name); return real.apply(this, args); };
  return () => { target[name] = real; };
};
const restore = [counted(AsyncLocalStorage.prototype, 'run'), counted(AsyncLocalStorage.prototype, 'enterWith'), counted(Hook, 'enable')];
const resourcesBefore = process.getActiveResourcesInfo();
watch.enable();
const modules = [];
for (const url of urls) modules.push(await import(url));
watch.disable();
for (const undo of restore) undo();
const resourcesAfter = process.getActiveResourcesInfo();
const promiseSymbols = Object.getOwnPropertySymbols(Promise.resolve()).map(String);
// A subclass's prototype is an object of its class for queryObjects: those of exported classes
// are counted apart, so that only instances remain. Errors are left out, whose subclasses are
// not all exported (a constant error would be no work anyway).
const classes = new Map();
for (const module of modules) for (const [name, value] of Object.entries(module)) if (typeof value === 'function' && value.prototype !== undefined && !(value.prototype instanceof Error)) classes.set(value, name);
const alive = {};
for (const [ctor, name] of classes) {
  const prototypes = [...classes.keys()].filter((other) => other !== ctor && ctor.prototype.isPrototypeOf(other.prototype)).length;
  const instances = queryObjects(ctor, { format: 'count' }) - prototypes;
  if (instances !== 0) alive[name] = instances;
}
console.log(JSON.stringify({ timers, contexts, resourcesBefore, resourcesAfter, promiseSymbols, alive }));
`;

function importedIn(urls: readonly string[]): Promise<Seen> {
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ['--import', 'tsx', '--disable-warning=ExperimentalWarning', '--input-type=module', '-e', probe, JSON.stringify(urls)],
      { cwd: fileURLToPath(ROOT) },
      (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Seen)),
    ),
  );
}

describe('importing the package', () => {
  it('imports every entry of package.json exports (the main one and each integration\'s)', () => {
    expect(entries().map((url) => url.slice(ROOT.href.length))).to.deep.equal([
      'lib/index.ts',
      'lib/redis.ts',
      'lib/postgres.ts',
      'lib/mcp.ts',
      'lib/otel.ts',
      'lib/testing.ts',
      'lib/providers.ts',
      'lib/streaming.ts',
      'lib/providers/aiSdkProvider.ts',
      'lib/openaiAgents.ts',
      'lib/langchain.ts',
    ]);
  });

  it('starts nothing: no timer (not even one cleared at once), no asynchronous context, no resource held, no object of its classes kept', async function () {
    // A fresh process compiling the whole library through tsx: slow on a loaded machine.
    this.timeout(120_000);
    const seen = await importedIn(entries());
    expect(seen.timers, 'timers and immediates created while importing').to.deep.equal([]);
    expect(seen.contexts, 'AsyncLocalStorage runs and async hooks enabled while importing').to.deep.equal([]);
    // What the import opened: resources after it that were not there before (the loader's own
    // MessagePort may close meanwhile, which the import did not do).
    const opened = [...seen.resourcesAfter];
    for (const kind of seen.resourcesBefore) {
      const at = opened.indexOf(kind);
      if (at >= 0) opened.splice(at, 1);
    }
    expect(opened, 'resources the import left open').to.deep.equal([]);
    expect(seen.promiseSymbols.filter((name) => name.includes('kResourceStore')), 'a storage left on').to.deep.equal([]);
    expect(seen.alive, 'objects of the exported classes alive after the import').to.deep.equal({});
  });

  // The probe itself: a module that sets a timer and clears it, and runs a storage, while it loads, is seen doing both.
  it('(the probe sees a timer cleared at once and a storage run while a module loads)', async function () {
    this.timeout(60_000);
    const busy = `data:text/javascript,${encodeURIComponent(
      "import { AsyncLocalStorage } from 'node:async_hooks'; clearTimeout(setTimeout(() => {}, 1000)); new AsyncLocalStorage().run(1, () => {}); export class Kept {} export const kept = new Kept();",
    )}`;
    const seen = await importedIn([busy]);
    expect(seen.timers).to.deep.equal(['Timeout']);
    // Node enables a hook of its own when a storage first runs: seen too.
    expect(seen.contexts).to.include('run');
    expect(seen.alive).to.deep.equal({ Kept: 1 });
  });
});
