// Type-checks the README's and docs' ```ts blocks, each page as one module (see pageModule),
// against the library's sources: `agent-lanes` and each entry of package.json's exports are mapped onto lib/,
// every other import resolves from this checkout's node_modules, and spec/docs/context.d.ts.in
// declares the names a block may use without introducing them (kept out of the spec project,
// whose own code must not see those globals). In process, through the
// TypeScript API; only the pages' own diagnostics are asked for.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { codeBlocksOf, documentedFiles } from './codeBlocks.js';
import { pageModule, type PageModule } from './pageProgram.js';

export interface BlockProblem {
  /** `docs/streaming.md:88`: the markdown file and line. */
  readonly where: string;
  readonly message: string;
}

export interface CompiledDocs {
  /** How many blocks were checked, and how many were marked not compiled. */
  readonly checked: number;
  readonly skipped: number;
  readonly problems: readonly BlockProblem[];
}

const options = (root: string): ts.CompilerOptions => ({
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2022.d.ts'],
  types: ['node'],
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  baseUrl: root,
  paths: entrySources(root),
});

/** Each entry of package.json "exports" mapped onto its source: `agent-lanes/redis` -> lib/redis.ts. */
export function entrySources(root: string): Record<string, string[]> {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; exports: Record<string, string | { import?: string }> };
  const paths: Record<string, string[]> = {};
  for (const [entry, target] of Object.entries(manifest.exports)) {
    const built = typeof target === 'string' ? target : target.import;
    if (built === undefined || !built.endsWith('.js')) continue;
    paths[manifest.name + entry.slice(1)] = [built.replace(/^\.\/dist\//, 'lib/').replace(/\.js$/, '.ts')];
  }
  return paths;
}

/** The names lib/index.ts exports. */
function libraryNames(program: ts.Program, index: string): Set<string> {
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(index)!);
  return new Set(module === undefined ? [] : checker.getExportsOfModule(module).map((symbol) => symbol.name));
}

/** The pages with blocks to check, each as one module by its file name (`docs_streaming_md.ts`), and the counts. */
export function docPages(root: string, library: ReadonlySet<string>): { readonly pages: ReadonlyMap<string, PageModule>; readonly checked: number; readonly skipped: number } {
  const pages = new Map<string, PageModule>();
  let checked = 0;
  let skipped = 0;
  for (const file of documentedFiles(root)) {
    const blocks = codeBlocksOf(root, file);
    const compiled = blocks.filter((block) => block.mark !== 'not compiled');
    checked += compiled.length;
    skipped += blocks.length - compiled.length;
    if (compiled.length > 0) pages.set(`${file.replace(/[/.]/g, '_')}.ts`, pageModule(compiled, library));
  }
  return { pages, checked, skipped };
}

/** The names a block may use without introducing them, as a declaration file's text. */
export const blockGlobals = (root: string): string => readFileSync(join(root, 'spec', 'docs', 'context.d.ts.in'), 'utf8');

/** Where a diagnostic of a page's module points: `docs/streaming.md:88`. */
export function whereIn(page: PageModule, line: number): string {
  const origin = page.origin[line];
  // A merged import's line names no block: it is named by the page.
  return origin !== undefined ? `${origin.block.file}:${origin.block.line + origin.line}` : `${page.origin.find((o) => o !== undefined)!.block.file} (an import)`;
}

/** The library's export names, read from lib/index.ts. */
export function libraryOf(root: string): { readonly program: ts.Program; readonly names: Set<string> } {
  const index = join(root, 'lib', 'index.ts');
  const program = ts.createProgram({ rootNames: [index], options: options(root) });
  return { program, names: libraryNames(program, index) };
}

export function compileDocs(root: string): CompiledDocs {
  const compilerOptions = options(root);
  const { program: libraryProgram, names } = libraryOf(root);
  const found = docPages(root, names);
  const { checked, skipped } = found;
  // Each page's module, at a path under spec/docs that is never written: node_modules resolve from there.
  const pages = new Map([...found.pages].map(([name, page]) => [join(root, 'spec', 'docs', '.pages', name), page]));

  const context = join(root, 'spec', 'docs', '.pages', 'context.d.ts');
  const files = new Map<string, string>([...pages].map(([path, page]) => [path, page.text]));
  files.set(context, blockGlobals(root));
  const host = ts.createCompilerHost(compilerOptions);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (path) => files.has(path) || fileExists.call(host, path);
  host.readFile = (path) => files.get(path) ?? readFile.call(host, path);
  host.getSourceFile = (path, version, ...rest) => {
    const text = files.get(path);
    return text !== undefined ? ts.createSourceFile(path, text, version, true) : getSourceFile.call(host, path, version, ...rest);
  };
  const program = ts.createProgram({ rootNames: [...files.keys()], options: compilerOptions, host, oldProgram: libraryProgram });

  const problems: BlockProblem[] = [];
  for (const [path, page] of pages) {
    const source = program.getSourceFile(path)!;
    for (const diagnostic of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const { line } = source.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      problems.push({ where: whereIn(page, line), message: ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ') });
    }
  }
  return { checked, skipped, problems };
}
