// The adaptive and budget lanes of RedisLaneStore against a real Redis: two stores (two processes
// of a fleet) sharing one Redis see one adaptive limit and spend from one budget window.
import { expect } from 'chai';
import { BudgetExceededError } from '../../../lib/errors.js';
import { RedisLaneStore, type BudgetSpec, type LaneLimitNotice, type LimitChange, type Permit } from '../../../lib/lanes/index.js';
import { keysUnder, redisFixture, until } from './server.js';

// A caller that records its grant, its loss and the limit changes it was told of.
function caller() {
  const seen = { granted: 0, lost: [] as Error[], changes: [] as LimitChange[] };
  return {
    seen,
    onGrant: { granted: () => seen.granted++, lost: (error: Error) => seen.lost.push(error), limitChanged: (change: LimitChange) => seen.changes.push(change) },
  };
}

describe('RedisLaneStore adaptive and budget lanes', function () {
  this.timeout(30_000);
  const redis = redisFixture('kinds');
  const { prefix } = redis;
  const store = (): RedisLaneStore => redis.store();

  it('keeps one adaptive limit for the fleet: a fall reported by one process bounds the other', async () => {
    const [a, b] = [store(), store()];
    const bounds = { min: 1, max: 4 };
    const first = caller();
    const held: Permit[] = [];
    held.push(a.enterAdaptive('tool:partner', bounds, first.onGrant, 'acme'));
    await until(() => first.seen.granted === 1, 'the first grant');
    held[0]!.report!('overload');
    await until(() => first.seen.changes.length === 1, 'the fall');
    expect(first.seen.changes[0]).to.deep.equal({ key: 'tool:partner', limit: 2, previous: 4, cause: 'overload' });
    expect(await redis.client.hGet(`${prefix}{tool:partner}:a`, 'limit')).to.equal('2');
    // The other process: one permit is held, the limit is two, so one more is granted and a third waits.
    const others = [caller(), caller()];
    held.push(b.enterAdaptive('tool:partner', bounds, others[0]!.onGrant, 'acme'));
    held.push(b.enterAdaptive('tool:partner', bounds, others[1]!.onGrant, 'acme'));
    await until(() => others[0]!.seen.granted === 1, 'the second grant');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(others[1]!.seen.granted).to.equal(0);
    held[0]!.leave();
    await until(() => others[1]!.seen.granted === 1, 'the third grant, once a permit came back');
    held[1]!.leave();
    held[2]!.leave();
    await Promise.all([a.idle(), b.idle()]);
  });

  it('grows the fleet limit back on success and grants the waiters a larger one lets in', async () => {
    const [a, b] = [store(), store()];
    const bounds = { min: 1, max: 2, initial: 1 };
    const first = caller();
    const second = caller();
    const heard: LaneLimitNotice[] = [];
    const told = b.limits$.subscribe((notice) => heard.push(notice));
    const p1 = a.enterAdaptive('tool:grow', bounds, first.onGrant);
    await until(() => first.seen.granted === 1, 'the first grant');
    const p2 = b.enterAdaptive('tool:grow', bounds, second.onGrant);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(second.seen.granted).to.equal(0);
    // b hears the fleet's changes of limits from its first adaptive lane on.
    await until(async () => Number(((await redis.client.sendCommand(['PUBSUB', 'NUMSUB', `${prefix}adaptive-limits`])) as [string, number])[1]) >= 2, 'both stores listening');
    // One success at a limit of one grows it to two: the waiter in the other process is granted while p1 still holds.
    p1.report!('ok');
    await until(() => second.seen.granted === 1, 'the waiter granted by the growth');
    expect(first.seen.changes).to.deep.equal([{ key: 'tool:grow', limit: 2, previous: 1, cause: 'success' }]);
    // The other process hears of the change it did not make: on its limits$ (the runner's activity$), and in its limits().
    await until(() => heard.length === 1, 'the other store hearing of the change');
    expect(heard[0]).to.include({ type: 'lane-limit', key: 'tool:grow', limit: 2, previous: 1, cause: 'success' });
    expect(b.limits()).to.deep.equal([{ key: 'tool:grow', limit: 2, min: 1, max: 2 }]);
    told.unsubscribe();
    p1.leave();
    p2.leave();
    await Promise.all([a.idle(), b.idle()]);
  });

  it('spends one budget window across the fleet and refuses what it cannot cover, until its end', async () => {
    const [a, b] = [store(), store()];
    const spec: BudgetSpec = { measure: 'cost', limit: 10, perSeconds: 60 };
    const first = caller();
    const permit = a.enterBudget('budget:cost:acme', spec, 7, first.onGrant, 'acme');
    await until(() => first.seen.granted === 1, 'the first spend');
    const refused = caller();
    b.enterBudget('budget:cost:acme', spec, 4, refused.onGrant, 'acme');
    await until(() => refused.seen.lost.length === 1, 'the refusal');
    const error = refused.seen.lost[0] as BudgetExceededError;
    expect(error).to.be.instanceOf(BudgetExceededError);
    expect(error).to.include({ tenant: 'acme', measure: 'cost', needed: 4, left: 3 });
    expect(error.until).to.be.within(Date.now() + 55_000, Date.now() + 61_000);
    // Each store lists the budgets it asked, as Redis last answered: b heard the 7 that a spent.
    expect(a.budgets()).to.deep.equal([{ key: 'budget:cost:acme', measure: 'cost', limit: 10, spent: 7, until: error.until }]);
    expect(b.budgets()).to.deep.equal([{ key: 'budget:cost:acme', measure: 'cost', limit: 10, spent: 7, until: error.until }]);
    // Another tenant's budget is its own.
    const other = caller();
    b.enterBudget('budget:cost:globex', spec, 10, other.onGrant, 'globex');
    await until(() => other.seen.granted === 1, "the other tenant's spend");
    // Work that never started gives back what it spent: the other process may then spend it.
    permit.report!('unstarted');
    await a.idle();
    const later = caller();
    b.enterBudget('budget:cost:acme', spec, 9, later.onGrant, 'acme');
    await until(() => later.seen.granted === 1, 'the spend after the give back');
    expect(await redis.client.hGet(`${prefix}{budget:cost:acme}:budget`, 'spent')).to.equal('9');
    await Promise.all([a.idle(), b.idle()]);
    expect(b.budgets().map(({ key, spent }) => [key, spent])).to.have.deep.members([
      ['budget:cost:acme', 9],
      ['budget:cost:globex', 10],
    ]);
  });

  it('lets a turn not known in advance through while something is left, and charges what it used', async () => {
    const [a, b] = [store(), store()];
    const spec: BudgetSpec = { measure: 'tokens', limit: 100, perSeconds: 60 };
    const turn = caller();
    const permit = a.enterBudget('budget:tokens:acme', spec, 0, turn.onGrant, 'acme');
    await until(() => turn.seen.granted === 1, 'the turn');
    permit.charge!(120);
    await a.idle();
    const next = caller();
    b.enterBudget('budget:tokens:acme', spec, 0, next.onGrant, 'acme');
    await until(() => next.seen.lost.length === 1, 'the refusal of the next turn');
    expect(next.seen.lost[0]).to.include({ needed: 1, left: 0 });
    const ttl = await redis.client.pTTL(`${prefix}{budget:tokens:acme}:budget`);
    expect(ttl).to.be.within(50_000, 60_000);
    expect(await keysUnder(redis.client, `${prefix}{budget:tokens:acme}`)).to.deep.equal([`${prefix}{budget:tokens:acme}:budget`]);
  });
});
