// A page's code blocks as one TypeScript module, read top to bottom as a reader reads them: each
// block sees the imports and the names of the blocks before it on its page (later blocks are
// nested in the scope of earlier ones, so a block may declare a name again). The imports of all
// blocks are hoisted and merged; `export` is dropped from declarations (a route handler's
// `export async function POST`). A block may name the library's own exports without importing
// them (a fragment of a page that imported them once): those it names are imported from
// 'agent-lanes'. Each line of the module is traced back to its block.
import ts from 'typescript';
import type { CodeBlock } from './codeBlocks.js';

export interface PageModule {
  readonly text: string;
  /** The block and the line within it (1-based) of each line of `text` (0-based index); undefined for glue. */
  readonly origin: ReadonlyArray<{ readonly block: CodeBlock; readonly line: number } | undefined>;
}

/** The imports of the blocks of a page, merged by module, and each block's other statements. */
export function pageModule(blocks: readonly CodeBlock[], library: ReadonlySet<string>): PageModule {
  // The library's names the blocks use.
  const used = new Set<string>();
  // By module: the names imported (local name -> the import's text), and whether any is a value import.
  const imports = new Map<string, Map<string, { text: string; typeOnly: boolean }>>();
  const namespaces = new Set<string>();
  const sideEffects = new Set<string>();
  const bodies: Array<{ block: CodeBlock; lines: Array<{ text: string; line: number }> }> = [];
  for (const block of blocks) {
    const source = ts.createSourceFile('block.ts', block.code, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
    const visit = (node: ts.Node): void => {
      if (ts.isIdentifier(node) && library.has(node.text)) used.add(node.text);
      ts.forEachChild(node, visit);
    };
    visit(source);
    // Lines of the block that belong to an import, to leave out of its body.
    const importLines = new Set<number>();
    // Offsets where an `export` keyword is dropped.
    const exportKeywords: Array<{ start: number; end: number }> = [];
    for (const statement of source.statements) {
      if (ts.isImportDeclaration(statement)) {
        const from = (statement.moduleSpecifier as ts.StringLiteral).text;
        const first = source.getLineAndCharacterOfPosition(statement.getStart()).line;
        const last = source.getLineAndCharacterOfPosition(statement.getEnd()).line;
        for (let l = first; l <= last; l++) importLines.add(l);
        const clause = statement.importClause;
        if (clause === undefined) {
          sideEffects.add(from);
          continue;
        }
        const names = imports.get(from) ?? new Map<string, { text: string; typeOnly: boolean }>();
        imports.set(from, names);
        if (clause.name !== undefined) names.set(`default:${clause.name.text}`, { text: clause.name.text, typeOnly: clause.isTypeOnly });
        const bindings = clause.namedBindings;
        if (bindings !== undefined && ts.isNamespaceImport(bindings)) {
          namespaces.add(`import ${clause.isTypeOnly ? 'type ' : ''}* as ${bindings.name.text} from '${from}';`);
        } else if (bindings !== undefined) {
          for (const element of bindings.elements) {
            const typeOnly = clause.isTypeOnly || element.isTypeOnly;
            const text = element.propertyName === undefined ? element.name.text : `${element.propertyName.text} as ${element.name.text}`;
            const known = names.get(element.name.text);
            names.set(element.name.text, { text, typeOnly: typeOnly && (known?.typeOnly ?? true) });
          }
        }
        continue;
      }
      const modifiers = ts.canHaveModifiers(statement) ? ts.getModifiers(statement) : undefined;
      const exported = modifiers?.find((m) => m.kind === ts.SyntaxKind.ExportKeyword);
      if (exported !== undefined) exportKeywords.push({ start: exported.getStart(), end: exported.getEnd() });
    }
    let code = block.code;
    for (const { start, end } of exportKeywords.reverse()) code = code.slice(0, start) + ' '.repeat(end - start) + code.slice(end);
    const lines = code.split('\n').map((text, i) => ({ text: importLines.has(i) ? '' : text, line: i + 1 }));
    bodies.push({ block, lines });
  }
  const imported = new Set([...imports.values()].flatMap((names) => [...names.keys()]));
  const own = imports.get('agent-lanes') ?? new Map<string, { text: string; typeOnly: boolean }>();
  imports.set('agent-lanes', own);
  for (const name of used) if (!imported.has(name)) own.set(name, { text: name, typeOnly: false });
  if (own.size === 0) imports.delete('agent-lanes');
  const text: string[] = [];
  const origin: Array<{ block: CodeBlock; line: number } | undefined> = [];
  const glue = (line: string): void => {
    text.push(line);
    origin.push(undefined);
  };
  for (const from of sideEffects) glue(`import '${from}';`);
  for (const line of namespaces) glue(line);
  for (const [from, names] of imports) {
    const defaults = [...names.entries()].filter(([key]) => key.startsWith('default:')).map(([, v]) => v.text);
    const named = [...names.entries()].filter(([key]) => !key.startsWith('default:')).map(([, v]) => `${v.typeOnly ? 'type ' : ''}${v.text}`);
    for (const name of defaults) glue(`import ${name} from '${from}';`);
    if (named.length > 0) glue(`import { ${named.join(', ')} } from '${from}';`);
  }
  for (const { block, lines } of bodies) {
    glue('{');
    for (const { text: line, line: n } of lines) {
      text.push(line);
      origin.push({ block, line: n });
    }
  }
  for (let i = 0; i < bodies.length; i++) glue('}');
  glue('export {};');
  return { text: text.join('\n'), origin };
}
