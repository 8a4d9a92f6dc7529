import { expect } from 'chai';
import { isLeft, isRight } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { ConfigError } from '../../lib/errors.js';
import { decodeArguments, resolveDeclaration, ToolRegistry, type DecodedArguments } from '../../lib/tools/index.js';

function configError(make: () => unknown): ConfigError {
  try {
    make();
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

// The verdict of a codec (or a Standard Schema that checks synchronously), given at once.
function decodedNow(...params: Parameters<typeof decodeArguments>): DecodedArguments {
  const decoded = decodeArguments(...params);
  if (decoded instanceof Promise) throw new Error('expected a verdict at once, got a Promise');
  return decoded;
}

describe('ToolRegistry', () => {
  it('registers tools, chainably, in order', () => {
    const registry = new ToolRegistry().register({ name: 'search' }, () => 1).register({ name: 'booking', parallelSafe: false }, () => 2);
    expect(registry.names).to.deep.equal(['search', 'booking']);
    expect(registry.get('booking')!.declaration).to.deep.include({ parallelSafe: false, idempotent: false, needsApproval: false });
  });

  it('refuses a duplicate name with ConfigError', () => {
    const registry = new ToolRegistry().register({ name: 'search' }, () => 1);
    expect(configError(() => registry.register({ name: 'search' }, () => 2)).message).to.equal('a tool named search is already registered');
  });

  const invalid = [
    { title: 'an empty name', declaration: { name: '' }, message: 'name must be 1 to 64 letters, digits, "_" or "-", got ""' },
    { title: 'a name with spaces', declaration: { name: 'look up' }, message: 'name must be 1 to 64 letters, digits, "_" or "-", got "look up"' },
    { title: 'a non-boolean parallelSafe', declaration: { name: 'x', parallelSafe: 'no' }, message: 'parallelSafe must be a boolean, got "no"' },
    { title: 'a non-boolean idempotent', declaration: { name: 'x', idempotent: 1 }, message: 'idempotent must be a boolean, got 1' },
    { title: 'args that are not a codec', declaration: { name: 'x', args: { q: 'string' } }, message: 'args must be an io-ts codec or a Standard Schema (zod, valibot, arktype), got {"q":"string"}' },
    { title: 'parameters that are not an object schema', declaration: { name: 'x', parameters: { type: 'string' } }, message: 'parameters must be an object JSON Schema ({ type: \'object\', ... }), got {"type":"string"}' },
    { title: 'a lane without a key', declaration: { name: 'x', lane: { limit: 2 } }, message: 'lane.key must be a non-empty string not starting with tenant:, turn:, turn-tool:, tool: or args:, got undefined' },
    { title: 'a lane keyed like one of the batch\'s own', declaration: { name: 'x', lane: { key: 'tool:y', limit: 2 } }, message: 'lane.key must be a non-empty string not starting with tenant:, turn:, turn-tool:, tool: or args:, got "tool:y"' },
    { title: 'a lane of no permits', declaration: { name: 'x', lane: { key: 'mcp:files', limit: 0 } }, message: 'lane.limit must be a positive integer, got 0' },
    { title: 'a misspelt lane field', declaration: { name: 'x', lane: { key: 'mcp:files', limt: 2 } }, message: 'a tool lane has no field limt; its fields are key, limit' },
    { title: 'a zero cost', declaration: { name: 'x', cost: 0 }, message: 'cost must be a positive finite number, got 0' },
    { title: 'a cost that is not a number', declaration: { name: 'x', cost: '2' }, message: 'cost must be a positive finite number, got "2"' },
    { title: 'a misspelt field', declaration: { name: 'x', parallelsafe: false }, message: 'a tool declaration has no field parallelsafe; its fields are name, description, args, parallelSafe, idempotent, needsApproval, parameters, lane, cost' },
  ];
  for (const c of invalid) {
    it(`refuses ${c.title}, naming the field`, () => {
      expect(configError(() => new ToolRegistry().register(c.declaration as never, () => 1)).message).to.equal(c.message);
    });
  }

  it('refuses a body that is not a function', () => {
    expect(configError(() => new ToolRegistry().register({ name: 'x' }, 'nope' as never)).message).to.equal('the body of tool x must be a function, got string');
  });

  it('shows a provider only name, description and a JSON Schema of the arguments', () => {
    const registry = new ToolRegistry().register(
      { name: 'search', description: 'Find things', args: t.type({ q: t.string, limit: t.union([t.number, t.undefined]) }), parallelSafe: false, idempotent: true },
      () => [],
    );
    const [spec] = registry.specs();
    expect(Object.keys(spec!)).to.deep.equal(['name', 'description', 'parameters']);
    expect(spec).to.deep.equal({
      name: 'search',
      description: 'Find things',
      parameters: { type: 'object', properties: { q: { type: 'string' }, limit: { type: 'number' } }, required: ['q'], additionalProperties: true },
    });
  });

  it('shows the parameters a declaration gives as they are, while its codec still decodes the arguments', () => {
    const parameters = { type: 'object', properties: { path: { type: 'string', description: 'Where' } }, required: ['path'] };
    const registry = new ToolRegistry().register({ name: 'read', args: t.UnknownRecord, parameters }, () => 1);
    expect(registry.specs()[0]!.parameters).to.deep.equal(parameters);
    // A copy, frozen: changing the object given changes nothing shown.
    parameters.required.push('mode');
    expect(registry.specs()[0]!.parameters).to.deep.equal({ type: 'object', properties: { path: { type: 'string', description: 'Where' } }, required: ['path'] });
    expect(isLeft(decodedNow(registry.get('read')!.declaration, '[1]'))).to.equal(true);
  });

  it('keeps a tool\'s own lane, and none for a tool that names none', () => {
    const registry = new ToolRegistry().register({ name: 'a', lane: { key: 'mcp:files', limit: 2 } }, () => 1).register({ name: 'b' }, () => 2);
    expect(registry.get('a')!.declaration.lane).to.deep.equal({ key: 'mcp:files', limit: 2 });
    expect(registry.get('b')!.declaration.lane).to.equal(undefined);
  });

  it('lists only the named tools, in the order named', () => {
    const registry = new ToolRegistry().register({ name: 'a' }, () => 1).register({ name: 'b' }, () => 2).register({ name: 'c' }, () => 3);
    expect(registry.specs(['c', 'a']).map((s) => s.name)).to.deep.equal(['c', 'a']);
  });
});

describe('decodeArguments', () => {
  const search = resolveDeclaration({ name: 'search', args: t.type({ q: t.string, page: t.number }) });

  it('decodes JSON text and objects alike', () => {
    for (const raw of ['{"q":"hotels","page":2}', { q: 'hotels', page: 2 }]) {
      const decoded = decodedNow(search, raw);
      expect(isRight(decoded) && decoded.right).to.deep.equal({ q: 'hotels', page: 2 });
    }
  });

  const failing = [
    { title: 'unparseable JSON', raw: '{"q":', message: /^bad arguments for search: arguments are not valid JSON \(/ },
    { title: 'a wrong type', raw: { q: 42, page: 1 }, message: /^bad arguments for search: args\.q: expected string, got 42$/ },
    { title: 'a missing field', raw: '{"q":"x"}', message: /^bad arguments for search: args\.page: expected number, got undefined$/ },
    { title: 'every failure at once', raw: { q: null, page: 'two' }, message: /args\.q: expected string, got null; args\.page: expected number, got "two"$/ },
  ];
  for (const c of failing) {
    it(`refuses ${c.title} with a message naming the path, what was expected and what came`, () => {
      const decoded = decodedNow(search, c.raw);
      expect(isLeft(decoded)).to.equal(true);
      if (isLeft(decoded)) {
        expect(decoded.left.name).to.equal('ToolArgumentsError');
        expect(decoded.left.message).to.match(c.message);
      }
    });
  }

  it('reads an empty string as no arguments', () => {
    const decoded = decodedNow(resolveDeclaration({ name: 'ping' }), '');
    expect(isRight(decoded) && decoded.right).to.deep.equal({});
  });
});
