// The ```ts blocks of the README and of docs/*.md, for the specs that compile and run them. A
// block may be marked by the line just before its fence: `<!-- not compiled -->` for a block
// that is deliberately a fragment, `<!-- runs -->` for a recipe a spec also runs.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CodeBlock {
  /** The markdown file, relative to the package root (`docs/streaming.md`). */
  readonly file: string;
  /** The 1-based line of the block's opening fence. */
  readonly line: number;
  readonly code: string;
  /** How the line before the fence marked it. */
  readonly mark: 'compiled' | 'not compiled' | 'runs';
}

/** The markdown files whose blocks are checked: the README and every page of docs/. */
export function documentedFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

/** Every ```ts block of `file` (relative to `root`), with its mark. */
export function codeBlocksOf(root: string, file: string): CodeBlock[] {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(lines[i]!);
    if (!fence) continue;
    const [, indent, marker, info] = fence;
    // The block's end: the next fence of the same kind at least as long.
    let end = i + 1;
    while (end < lines.length && !new RegExp(`^\\s*${marker![0] === '`' ? '`' : '~'}{${marker!.length},}\\s*$`).test(lines[end]!)) end++;
    const language = info!.trim().split(/\s+/)[0];
    if (language === 'ts' || language === 'typescript') {
      const before = i > 0 ? lines[i - 1]!.trim() : '';
      const mark = before === '<!-- not compiled -->' ? 'not compiled' : before === '<!-- runs -->' ? 'runs' : 'compiled';
      const code = lines.slice(i + 1, end).map((line) => (line.startsWith(indent!) ? line.slice(indent!.length) : line)).join('\n');
      blocks.push({ file, line: i + 1, code, mark });
    }
    i = end;
  }
  return blocks;
}

/** Every block of the README and docs/. */
export function documentedBlocks(root: string): CodeBlock[] {
  return documentedFiles(root).flatMap((file) => codeBlocksOf(root, file));
}
