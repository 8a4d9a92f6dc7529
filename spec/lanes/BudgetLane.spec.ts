import { expect } from 'chai';
import { BudgetExceededError } from '../../lib/errors.js';
import { LaneTable, type BudgetSpec } from '../../lib/lanes/index.js';

const tokens: BudgetSpec = { measure: 'tokens', limit: 100, perSeconds: 60 };
const cost: BudgetSpec = { measure: 'cost', limit: 10, perSeconds: 60 };

// A grant target that records what it was told.
function listener() {
  const told: string[] = [];
  let error: Error | undefined;
  return {
    told,
    get error() {
      return error;
    },
    granted: () => told.push('granted'),
    lost: (e: Error) => {
      error = e;
      told.push('lost');
    },
  };
}

describe('LaneTable budget lanes', () => {
  it('grants what the window covers and spends it, opening the window at the first spend', () => {
    let now = 1_000;
    const table = new LaneTable({ now: () => now });
    const a = listener();
    const permit = table.enterBudget('budget:cost:acme', cost, 4, a, 'acme');
    expect(a.told).to.deep.equal(['granted']);
    expect(permit.holding).to.equal(true);
    expect(table.budgets()).to.deep.equal([{ key: 'budget:cost:acme', measure: 'cost', limit: 10, spent: 4, until: 61_000 }]);
    now = 2_000;
    permit.leave();
    expect(table.budgets()[0]!.spent).to.equal(4);
  });

  it('refuses an amount the window cannot cover, with how much, how much is left and until when', () => {
    const table = new LaneTable({ now: () => 0 });
    table.enterBudget('budget:cost:acme', cost, 8, listener(), 'acme');
    const b = listener();
    const permit = table.enterBudget('budget:cost:acme', cost, 3, b, 'acme');
    expect(b.told).to.deep.equal(['lost']);
    expect(permit.holding).to.equal(false);
    expect(b.error).to.be.instanceOf(BudgetExceededError);
    expect(b.error).to.include({ tenant: 'acme', measure: 'cost', needed: 3, left: 2, until: 60_000 });
    expect(b.error!.message).to.match(/^the tenant's budget is spent until 1970-01-01T00:01:00.000Z/);
  });

  it('lets an amount not known in advance (0) through while something is left, then charges what it cost', () => {
    let now = 0;
    const table = new LaneTable({ now: () => now });
    const turn = table.enterBudget('budget:tokens:acme', tokens, 0, listener(), 'acme');
    turn.charge!(130);
    // The turn already running may overspend; the next one is refused.
    const next = listener();
    table.enterBudget('budget:tokens:acme', tokens, 0, next, 'acme');
    expect(next.error).to.include({ needed: 1, left: 0, until: 60_000 });
    now = 60_000;
    const later = listener();
    table.enterBudget('budget:tokens:acme', tokens, 0, later, 'acme');
    expect(later.told).to.deep.equal(['granted']);
  });

  it('gives back what work that never started had spent, and only in the window it was spent in', () => {
    let now = 0;
    const table = new LaneTable({ now: () => now });
    const a = table.enterBudget('budget:cost:acme', cost, 6, listener(), 'acme');
    a.report!('unstarted');
    expect(table.budgets()).to.deep.equal([{ key: 'budget:cost:acme', measure: 'cost', limit: 10, spent: 0, until: 60_000 }]);
    const b = table.enterBudget('budget:cost:acme', cost, 6, listener(), 'acme');
    now = 60_000;
    table.enterBudget('budget:cost:acme', cost, 1, listener(), 'acme');
    b.report!('unstarted');
    expect(table.budgets()[0]!.spent).to.equal(1);
  });

  it('replaces the declared amount by the reported one', () => {
    const table = new LaneTable({ now: () => 0 });
    const a = table.enterBudget('budget:cost:acme', cost, 2, listener(), 'acme');
    a.charge!(5);
    expect(table.budgets()[0]!.spent).to.equal(5);
    a.charge!(1);
    expect(table.budgets()[0]!.spent).to.equal(1);
  });

  it("keeps each tenant's window apart", () => {
    const table = new LaneTable({ now: () => 0 });
    table.enterBudget('budget:cost:acme', cost, 10, listener(), 'acme');
    const other = listener();
    table.enterBudget('budget:cost:globex', cost, 10, other, 'globex');
    expect(other.told).to.deep.equal(['granted']);
  });

  it('throws the refusal to a caller that cannot be told it', () => {
    const table = new LaneTable({ now: () => 0 });
    expect(() => table.enterBudget('budget:cost:acme', cost, 11, () => undefined, 'acme')).to.throw(BudgetExceededError);
  });

  it('keeps no window once it closed', () => {
    let now = 0;
    const table = new LaneTable({ now: () => now });
    for (let i = 0; i < 1000; i++) table.enterBudget(`budget:cost:t${i}`, cost, 1, listener(), `t${i}`);
    now = 60_000;
    expect(table.budgets()).to.deep.equal([]);
  });
});

describe('LaneTable budget windows over time', () => {
  it('does not keep the closed windows of tenants that never came back', () => {
    let now = 0;
    const table = new LaneTable({ now: () => now });
    for (let i = 0; i < 1000; i++) table.enterBudget(`budget:cost:old${i}`, cost, 1, listener(), `old${i}`);
    now = 60_000;
    for (let i = 0; i < 1000; i++) table.enterBudget(`budget:cost:new${i}`, cost, 1, listener(), `new${i}`);
    const windows = (table as unknown as { budgetLanes: { windows: Map<string, unknown> } }).budgetLanes.windows;
    expect([...windows.keys()].filter((key) => key.includes(':old'))).to.have.length.below(200);
  });
});
