// The arrows between lib/'s files go one way (docs/architecture.md): no import circle of more
// than two files, type-only imports counted, as madge reads them; and lib/runner/ keeps no more
// than ten files at its top level, the rest in its named parts (model/, turn/, resume/, journal/,
// trace/). madge's own `circular()` names one circle per strongly connected set of files it walks
// into, not every circle: the check here takes the sets themselves, so a circle madge does not
// name is found too.
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

interface MadgeResult {
  /** Each file (relative to the folder read) and the files it imports. */
  obj(): Record<string, string[]>;
  circular(): string[][];
}
type Madge = (path: string, config: object) => Promise<MadgeResult>;

const ROOT = new URL('../../', import.meta.url);
// madge has no declarations of its own: read through require, with the shape used here.
const madge = createRequire(import.meta.url)('madge') as Madge;

/** The import graph of lib/, type-only imports and re-exports included. */
async function libGraph(): Promise<MadgeResult> {
  return madge(fileURLToPath(new URL('lib', ROOT)), {
    fileExtensions: ['ts'],
    tsConfig: fileURLToPath(new URL('tsconfig.json', ROOT)),
    detectiveOptions: { ts: { skipTypeImports: false }, tsx: { skipTypeImports: false } },
  });
}

/** The strongly connected sets of files (Tarjan), each sorted; a file in no circle is a set of one. */
function stronglyConnected(graph: Readonly<Record<string, readonly string[]>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const sets: string[][] = [];
  let next = 0;
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const to of graph[file] ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(file, Math.min(low.get(file)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(file, Math.min(low.get(file)!, index.get(to)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const set: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      set.push(member);
    } while (member !== file);
    sets.push(set.sort());
  };
  for (const file of Object.keys(graph)) if (!index.has(file)) visit(file);
  return sets;
}

/**
 * The sets of files that hold a circle of more than two files. A strongly connected set of three
 * or more holds none only when each of its imports is answered by one back and the pairs form a
 * tree (a <> b <> c); any other import within it closes a longer circle.
 */
export function knots(graph: Readonly<Record<string, readonly string[]>>): string[][] {
  return stronglyConnected(graph).filter((set) => {
    if (set.length < 3) return false;
    const members = new Set(set);
    let pairs = 0;
    for (const from of set) {
      for (const to of graph[from] ?? []) {
        if (!members.has(to) || to === from) continue;
        if (!(graph[to] ?? []).includes(from)) return true;
        pairs++;
      }
    }
    // Each pair was counted from both ends; a tree of n files has n - 1 pairs.
    return pairs / 2 !== set.length - 1;
  });
}

describe('lib/ import graph (madge, type-only imports counted)', function () {
  // madge reads every file of lib/: a few seconds, more on a loaded machine.
  this.timeout(120_000);

  describe('knots (the check itself)', () => {
    it('finds a circle of three files, and one of three in a larger set', () => {
      expect(knots({ a: ['b'], b: ['c'], c: ['a'] })).to.deep.equal([['a', 'b', 'c']]);
      expect(knots({ a: ['b'], b: ['a', 'c'], c: ['d'], d: ['b'] })).to.deep.equal([['a', 'b', 'c', 'd']]);
    });

    it('lets pairs of files that import each other be, even chained (a <> b <> c)', () => {
      expect(knots({ a: ['b'], b: ['a'] })).to.deep.equal([]);
      expect(knots({ a: ['b'], b: ['a', 'c'], c: ['b'] })).to.deep.equal([]);
    });

    it('finds the circle closed by one import more among pairs (a <> b <> c, c -> a)', () => {
      expect(knots({ a: ['b'], b: ['a', 'c'], c: ['b', 'a'] })).to.deep.equal([['a', 'b', 'c']]);
    });
  });

  it('has no import circle of more than two files', async () => {
    const result = await libGraph();
    const graph = result.obj();
    // Sanity: the graph is lib/'s, and madge read type-only imports (parts.ts imports nothing else of the runner).
    expect(graph['index.ts'], 'lib/index.ts read').to.be.an('array').that.is.not.empty;
    expect(graph['runner/parts.ts'], 'type-only imports read').to.include('runner/Agent.ts');
    const found = knots(graph);
    const long = result.circular().filter((circle) => circle.length > 2);
    const said = [...found.map((set) => `files in a circle of more than two: ${set.join(', ')}`), ...long.map((circle) => `madge: ${circle.join(' > ')}`)];
    expect(said, said.join('\n')).to.deep.equal([]);
  });

  it('keeps no more than ten files at the top of lib/runner/', () => {
    const top = readdirSync(new URL('lib/runner/', ROOT), { withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => entry.name);
    expect(top.length, `lib/runner/ holds ${top.length} files at its top: ${top.join(', ')}`).to.be.at.most(10);
  });
});
