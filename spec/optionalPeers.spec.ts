// @modelcontextprotocol/sdk and @opentelemetry/api are optional peer dependencies: the library
// must import, and run, without them. Checked twice: no module of lib/ imports them but for
// types, and a child process that cannot resolve them imports the library and runs an agent.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const lib = fileURLToPath(new URL('../lib/', import.meta.url));
const optional = /^@modelcontextprotocol\/|^@opentelemetry\/|^@standard-schema\/|^zod(\/|$)|^valibot$|^arktype$|^pg$/;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

// Makes the optional packages unresolvable for the child's imports, as if they were not installed.
const hide = `data:text/javascript,${encodeURIComponent(`import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(`export async function resolve(specifier, context, next) {
  if (/^@modelcontextprotocol\\/|^@opentelemetry\\//.test(specifier)) throw Object.assign(new Error('not installed: ' + specifier), { code: 'ERR_MODULE_NOT_FOUND' });
  return next(specifier, context);
}`)}));`)}`;

const script = `
const { Agent, AgentRunner, ScriptedProvider, ToolRegistry } = await import(${JSON.stringify(join(lib, 'index.ts'))});
await import('@opentelemetry/api').then(() => console.log('api found'), () => console.log('api hidden'));
const tools = new ToolRegistry().register({ name: 'work' }, () => 1);
const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'work', arguments: {} }] }, { text: 'done' }]);
const result = await new AgentRunner({ provider, tools }).run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go');
console.log(result.status);
`;

describe('the optional peer dependencies', () => {
  it('are imported by no module of lib/ but for their types', () => {
    const runtime: string[] = [];
    for (const file of sources(lib)) {
      for (const match of readFileSync(file, 'utf8').matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms)) {
        if (optional.test(match[3]!) && match[2] === undefined) runtime.push(`${file}: ${match[3]}`);
      }
    }
    expect(runtime).to.deep.equal([]);
  });

  it('need not be installed: the library imports and runs an agent without them', async function () {
    this.timeout(30_000);
    const output = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ['--import', 'tsx', '--import', hide, '--input-type=module', '-e', script], (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
      ),
    );
    expect(output.trim().split('\n')).to.deep.equal(['api hidden', 'completed']);
  });
});
