// The README's and docs' code blocks are code: every ```ts block is type-checked against the
// library, so an import from the wrong entry, a function that does not exist or an option that
// was renamed fails here, naming the page and line. A block may be marked
// `<!-- not compiled -->` (a type's shape, a pipeline's outline); few are.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { codeBlocksOf } from './codeBlocks.js';
import { compileDocs } from './compileBlocks.js';
import { pageModule } from './pageProgram.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the docs\' code blocks', function () {
  // One TypeScript program over the library and every page.
  this.timeout(120_000);

  it('type-check against the library, every page of docs/ and the README', () => {
    const { checked, skipped, problems } = compileDocs(ROOT);
    expect(problems.map((p) => `${p.where}: ${p.message}`)).to.deep.equal([]);
    expect(checked).to.be.above(40);
    // Marking a block not compiled is for the odd fragment, not a way around this spec.
    expect(skipped).to.be.below(checked / 10);
  });

  it('import aiSdkProvider from its own entry, agent-lanes/ai-sdk, wherever they use it', () => {
    const blocks = ['README.md', 'docs/streaming-models.md', 'docs/providers.md'].flatMap((file) => codeBlocksOf(ROOT, file));
    const using = blocks.filter((block) => block.code.includes('aiSdkProvider('));
    expect(using.length).to.be.above(0);
    for (const block of using) expect(block.code, `${block.file}:${block.line}`).to.match(/import \{[^}]*\baiSdkProvider\b[^}]*\} from 'agent-lanes\/ai-sdk'/);
  });

  it('reads a page top to bottom: a block sees the imports and names of the blocks before it, and may declare a name again', () => {
    const block = (line: number, code: string) => ({ file: 'x.md', line, code, mark: 'compiled' as const });
    const page = pageModule(
      [block(1, "import { a } from 'm';\nconst x = a;"), block(9, "import { a, type B } from 'm';\nexport const x: B = a;\nToolRegistry;")],
      new Set(['ToolRegistry']),
    );
    expect(page.text.split('\n').slice(0, 2)).to.deep.equal(["import { a, type B } from 'm';", "import { ToolRegistry } from 'agent-lanes';"]);
    expect(page.text).to.include('{\n\nconst x = a;\n{\n\n       const x: B = a;');
    const line = page.text.split('\n').indexOf('       const x: B = a;');
    expect(page.origin[line]).to.deep.include({ line: 2 });
    expect(page.origin[line]!.block.line).to.equal(9);
  });
});
