// What each entry of the package's exports map asks of a consumer's compiler: the declarations
// are emitted (as `npm run build` emits them, into a temp folder) and followed from each entry's
// `types`, and every package they import is listed. The main entry may name no optional peer, so
// an app without them compiles it with skipLibCheck off; an integration's entry names only its
// own. (spec/package/consumer.spec.ts then compiles the docs' first programs in a project with no
// optional peer installed.)
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');

interface Manifest {
  readonly exports: Readonly<Record<string, string | { readonly types?: string }>>;
  readonly peerDependenciesMeta: Readonly<Record<string, { readonly optional?: boolean }>>;
}

/** The optional peers an entry may name in its declarations: its integration's own. */
// The fleet, PostgreSQL, MCP and OpenTelemetry entries meet their clients by shape: they name none.
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  '.': [],
  './redis': [],
  './postgres': [],
  './mcp': [],
  './otel': [],
  './testing': [],
  './providers': [],
  './streaming': [],
  './ai-sdk': ['@ai-sdk/provider'],
  // The framework entries read tools by their shape.
  './openai-agents': [],
  './langchain': [],
};

/** A specifier's package: `@scope/name` or `name`. */
const packageOf = (specifier: string): string => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');

/** Every package the declarations reachable from `entry` import (comments not read), with the first file naming it. */
async function packagesNamed(entry: string, outDir: string): Promise<Map<string, string>> {
  const named = new Map<string, string>();
  const seen = new Set<string>();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const { importedFiles, typeReferenceDirectives } = ts.preProcessFile(await readFile(file, 'utf8'), true, true);
    for (const { fileName } of [...importedFiles, ...typeReferenceDirectives]) {
      if (fileName.startsWith('.')) todo.push(resolve(dirname(file), fileName.replace(/\.js$/, '.d.ts')));
      else if (!fileName.startsWith('node:') && !named.has(packageOf(fileName))) named.set(packageOf(fileName), relative(outDir, file));
    }
  }
  return named;
}

describe('the declarations of each entry of the exports map', function () {
  this.timeout(180_000);
  let outDir: string;
  let manifest: Manifest;

  before(async () => {
    outDir = await mkdtemp(join(tmpdir(), 'agent-lanes-declarations-'));
    manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as Manifest;
    await new Promise<void>((done, fail) =>
      execFile(process.execPath, [TSC, '-p', join(ROOT, 'tsconfig.build.json'), '--emitDeclarationOnly', '--declarationMap', 'false', '--sourceMap', 'false', '--outDir', outDir], { cwd: ROOT }, (error, stdout) =>
        error ? fail(new Error(`${error.message}\n${stdout}`)) : done(),
      ),
    );
  });

  after(async () => {
    if (outDir !== undefined) await rm(outDir, { recursive: true, force: true });
  });

  it('name no optional peer but their integration\'s own', async () => {
    const optional = Object.keys(manifest.peerDependenciesMeta).filter((peer) => manifest.peerDependenciesMeta[peer]!.optional === true);
    expect(optional).to.include.members(['@opentelemetry/api', 'pg', 'redis', 'ioredis', '@modelcontextprotocol/sdk', 'ai', '@ai-sdk/provider', 'zod', 'valibot', 'arktype', '@standard-schema/spec']);
    const found: string[] = [];
    for (const [entry, target] of Object.entries(manifest.exports)) {
      const types = typeof target === 'string' ? undefined : target.types;
      if (types === undefined) continue;
      expect(ALLOWED, `the entry ${entry} is listed here`).to.have.property(entry);
      const named = await packagesNamed(join(outDir, relative('dist', types)), outDir);
      for (const [name, file] of named) if (optional.includes(name) && !ALLOWED[entry]!.includes(name)) found.push(`${entry}: ${name} (${file})`);
    }
    expect(found).to.deep.equal([]);
  });
});
