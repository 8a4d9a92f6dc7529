// What the `engines` field promises, and where an integration promises less. The core runs on
// every Node the field names, so each dependency's own `engines` must allow all of them; an
// integration runs where the library and its peers both do, so docs/getting-started.md's table
// says, for each integration, the Node versions left when the field is met with the `engines` of
// the peers this checkout tests with (read from node_modules); the README names each
// integration that needs more than the field.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Manifest {
  readonly name: string;
  readonly version: string;
  readonly engines?: { readonly node?: string };
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly devDependencies?: Readonly<Record<string, string>>;
  readonly peerDependencies?: Readonly<Record<string, string>>;
}

/** The package.json of the checkout (no name) or of an installed package (its folder under node_modules, an alias's included). */
const manifestOf = (folder?: string): Manifest => JSON.parse(readFileSync(join(ROOT, ...(folder === undefined ? [] : ['node_modules', folder]), 'package.json'), 'utf8')) as Manifest;

// Node versions as [major, minor, patch]; a range as a union of intervals [from, to) (to undefined: no end).
type Version = readonly [number, number, number];
type Interval = { readonly from: Version; readonly to: Version | undefined };

const compare = (a: Version, b: Version): number => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
const max = (a: Version, b: Version): Version => (compare(a, b) >= 0 ? a : b);
const min = (a: Version | undefined, b: Version | undefined): Version | undefined => (a === undefined ? b : b === undefined ? a : compare(a, b) <= 0 ? a : b);

function versionOf(text: string): Version {
  const parts = text.split('.').map((part) => (/^\d+$/.test(part) ? Number(part) : 0));
  return [parts[0] ?? 0, parts[1] ?? 0, parts[2] ?? 0];
}

/** The forms `engines` fields use here: `>=X[.Y[.Z]]` (`.x` allowed), `^X.Y.Z`, joined by `||`; none means every version. */
function rangeOf(text: string | undefined): Interval[] {
  if (text === undefined) return [{ from: [0, 0, 0], to: undefined }];
  return text.split('||').map((alternative) => {
    const spec = alternative.replace(/\s+/g, '');
    const atLeast = /^>=(\d+(?:\.(?:\d+|x))*)$/.exec(spec);
    if (atLeast) return { from: versionOf(atLeast[1]!), to: undefined };
    const caret = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(spec);
    if (caret) return { from: versionOf(spec.slice(1)), to: [Number(caret[1]) + 1, 0, 0] as Version };
    throw new Error(`an engines range this spec cannot read: ${text}`);
  });
}

function intersect(a: readonly Interval[], b: readonly Interval[]): Interval[] {
  return a.flatMap((x) =>
    b.flatMap((y) => {
      const from = max(x.from, y.from);
      const to = min(x.to, y.to);
      return to === undefined || compare(from, to) < 0 ? [{ from, to }] : [];
    }),
  );
}

/** A range written back as `engines` writes it: `^20.19.0 || >=22.12.0`. */
function written(range: readonly Interval[]): string {
  return range
    .map(({ from, to }) => {
      if (to === undefined) return `>=${from.join('.')}`;
      if (compare(to, [from[0] + 1, 0, 0]) === 0) return `^${from.join('.')}`;
      throw new Error(`a range that is not a caret: ${from.join('.')} to ${to.join('.')}`);
    })
    .join(' || ');
}

/** Each package this checkout has installed (a dev dependency, its alias included), by `name major`. */
function installedPeers(manifest: Manifest): Map<string, Manifest> {
  const installed = new Map<string, Manifest>();
  for (const folder of Object.keys({ ...manifest.devDependencies, ...manifest.dependencies })) {
    const found = manifestOf(folder);
    installed.set(`${found.name} ${found.version.split('.')[0]}`, found);
  }
  return installed;
}

/** docs/getting-started.md's table of integrations: each row's peers (`name major`) and the Node it states. */
function nodeTable(): Array<{ integration: string; peers: string[]; node: string }> {
  const text = readFileSync(join(ROOT, 'docs', 'getting-started.md'), 'utf8');
  const at = text.split('\n').findIndex((line) => line.trim() === '| integration | peers | Node |');
  expect(at, 'docs/getting-started.md has the table | integration | peers | Node |').to.be.above(0);
  const lines = text.split('\n').slice(at + 2);
  const table = lines.slice(0, lines.findIndex((line) => !line.trim().startsWith('|')));
  return table.map((line) => {
    const cells = line.trim().replace(/\\\|/g, '\u0000').split('|').slice(1, -1).map((cell) => cell.trim().replace(/\u0000/g, '|'));
    const [integration, peers, node] = cells as [string, string, string];
    return { integration, peers: [...peers.matchAll(/`([^`]+)` (\d+)/g)].map(([, name, major]) => `${name} ${major}`), node: /^`(.*)`$/.exec(node)?.[1] ?? node };
  });
}

describe('the Node versions the package promises', () => {
  const manifest = manifestOf();
  const engines = rangeOf(manifest.engines?.node);

  it('the core: each dependency and rxjs run on every Node the engines field names', () => {
    expect(manifest.engines?.node).to.equal('^20.19.0 || >=22.12.0');
    for (const name of [...Object.keys(manifest.dependencies ?? {}), 'rxjs']) {
      const { engines: theirs } = manifestOf(name);
      expect(written(intersect(engines, rangeOf(theirs?.node))), `${name} (engines ${theirs?.node ?? 'none'})`).to.equal(manifest.engines?.node);
    }
  });

  it('docs/getting-started.md\'s table states, for each integration, the Node its peers leave of the engines field', () => {
    const installed = installedPeers(manifest);
    const table = nodeTable();
    const stated = table.map(({ integration, node }) => `${integration}: ${node}`);
    const found = table.map(({ integration, peers }) => {
      let range = engines;
      for (const peer of peers) {
        const peerManifest = installed.get(peer);
        expect(peerManifest, `${integration}: ${peer} is one this checkout installs`).to.not.equal(undefined);
        range = intersect(range, rangeOf(peerManifest!.engines?.node));
      }
      return `${integration}: ${written(range)}`;
    });
    expect(stated).to.deep.equal(found);
    // Every optional peer has its row.
    const named = new Set(table.flatMap(({ peers }) => peers.map((peer) => peer.split(' ')[0])));
    expect(Object.keys(manifest.peerDependencies ?? {}).filter((peer) => !named.has(peer))).to.deep.equal([]);
    // ai 7 is the one that needs more, today: a change of that shows here.
    expect(found.filter((row) => !row.endsWith(manifest.engines!.node!))).to.deep.equal(['the AI SDK 7 (`agent-lanes/ai-sdk`): >=22.12.0']);
  });

  it('the README names each integration that needs more than the engines field, with the Node it needs', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    expect(readme).to.include('Node `^20.19.0 || >=22.12.0` for the core and every integration but one');
    expect(readme).to.include('`ai` 7 and the `@ai-sdk/*` 4 packages need Node 22, so `agent-lanes/ai-sdk` with them needs Node `>=22.12.0`');
  });
});
