// The fleet's budget lanes: one Redis hash per budget (spent, until), changed only by these Lua
// scripts and timed by Redis's clock (TIME), so every process of the fleet spends from one
// window. The rule is the in-process one (BudgetLane.ts): a window opens with the first spend
// after the last one closed and lasts perSeconds; a known amount must fit in what is left, an
// amount not known in advance (0) needs something left. The hash expires with its window.
import { LaneLostError } from '../../errors.js';
import { reportUnhandled } from '../../unhandled.js';
import type { LaneSignal } from '../AdaptiveLimit.js';
import { refusal, type BudgetOccupancy, type BudgetSpec } from '../BudgetLane.js';
import { grant, type OnGrant } from '../Lane.js';
import type { Permit } from '../LaneTable.js';
import { laneBase } from './keys.js';
import { tellLost } from './requests.js';
import { Pending } from './pending.js';
import { script, type Script } from './scripts.js';

// The budget's window, read with Redis's clock: a window whose time is up counts as none.
const window = String.raw`
local K = KEYS[1]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local spent = tonumber(redis.call('HGET', K, 'spent') or '0')
local ends = tonumber(redis.call('HGET', K, 'until') or '0')
if ends <= now then spent = 0; ends = 0 end
local function spend(amount, perMs)
  if ends == 0 then
    if amount <= 0 then return end
    ends = now + perMs
    redis.call('DEL', K)
    redis.call('HSET', K, 'until', string.format('%.0f', ends))
    redis.call('PEXPIREAT', K, string.format('%.0f', ends))
  end
  spent = math.max(0, spent + amount)
  redis.call('HSET', K, 'spent', tostring(spent))
end
`;

/**
 * Asks to cover an amount. ARGV: limit, window (ms), amount. Out: '1' (covered and spent) or '0',
 * what the window has spent, when it closes (Redis ms; now when none is open).
 */
export const budgetScript = script(`${window}
local limit, perMs, amount = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local covered
if amount > 0 then covered = spent + amount <= limit else covered = spent < limit end
if not covered then return { '0', tostring(spent), string.format('%.0f', ends == 0 and now or ends) } end
spend(amount, perMs)
return { '1', tostring(spent), string.format('%.0f', ends) }
`);

/**
 * Spends more (or gives back) after the fact. ARGV: amount (negative: given back), window (ms),
 * and for a give back the closing time of the window it was spent in ('0': whichever is open).
 * Out: what the window has spent, when it closes (0: none open).
 */
export const chargeScript = script(`${window}
local amount, perMs, spentIn = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if amount > 0 or (ends ~= 0 and (spentIn == 0 or spentIn == ends)) then spend(amount, perMs) end
return { tostring(spent), string.format('%.0f', ends) }
`);

/** How the fleet budgets reach Redis: one script, its keys and arguments, answered later. */
export type AskRedis = (script: Script, keys: readonly string[], args: readonly string[]) => Promise<unknown>;

// Reads a script's answer as the strings it is made of.
function parts(answer: unknown, length: number): string[] {
  if (!Array.isArray(answer) || answer.length < length) throw new TypeError(`a budget script answered ${JSON.stringify(answer)}`);
  return answer.map((part) => String(part));
}

/** A request to a fleet budget: granted once Redis covers it, else lost (a BudgetExceededError, or Redis unreachable). */
export class FleetBudgetPermit implements Permit {
  holding = false;
  // What it spent, and when the window it was spent in closes (Redis ms).
  private charged = 0;
  private spentIn = 0;
  // Set once the work was reported or left: a grant that comes later gives back what it spent.
  private over = false;

  constructor(
    private readonly budgets: FleetBudgets,
    readonly key: string,
    readonly spec: BudgetSpec,
    readonly onGrant: OnGrant,
  ) {}

  /** @internal Redis covered it: `amount` was spent in the window closing at `until`. */
  covered(amount: number, until: number): void {
    this.charged = amount;
    this.spentIn = until;
    if (this.over) {
      // Left before Redis answered: never started, what it spent goes back.
      this.report('unstarted');
      return;
    }
    this.holding = true;
    try {
      grant(this.onGrant);
    } catch (error) {
      reportUnhandled(error);
    }
  }

  leave(): void {
    if (!this.holding) this.over = true;
    this.holding = false;
  }

  report(signal: LaneSignal): void {
    if (signal !== 'unstarted' || this.charged === 0) return;
    const amount = this.charged;
    this.charged = 0;
    this.budgets.charge(this, -amount, this.spentIn);
  }

  charge(total: number): void {
    if (!(total >= 0) || total === this.charged) return;
    const delta = total - this.charged;
    this.charged = total;
    this.budgets.charge(this, delta, 0);
  }
}

/** The budgets of a RedisLaneStore. */
export class FleetBudgets {
  private readonly pending = new Pending();
  // What Redis last answered for each budget this process asked (what its window spent, until when), for `list`.
  private readonly known = new Map<string, BudgetOccupancy>();
  // Its size after the last sweep of closed windows (a tenant seen once is not kept for ever).
  private sweptAt = 0;

  constructor(
    private readonly prefix: string,
    private readonly ask: AskRedis,
  ) {}

  enter(key: string, spec: BudgetSpec, amount: number, onGrant: OnGrant, party: string): Permit {
    const permit = new FleetBudgetPermit(this, key, spec, onGrant);
    this.pending.track(
      this.ask(budgetScript, [this.keyOf(key)], [String(spec.limit), String(spec.perSeconds * 1000), String(amount)]).then(
        (answer) => {
          const [covered, spent, until] = parts(answer, 3);
          this.heard(key, spec, Number(spent), Number(until));
          if (covered === '1') permit.covered(amount, Number(until));
          else tellLost(onGrant, refusal(party, spec, amount, Number(spent), Number(until)));
        },
        (error: unknown) => tellLost(onGrant, new LaneLostError(key, `budget ${key} could not be asked (${error instanceof Error ? error.message : String(error)})`)),
      ),
    );
    return permit;
  }

  /** @internal Spends `amount` more (negative: gives back, to the window closing at `spentIn` if not 0). */
  charge(permit: FleetBudgetPermit, amount: number, spentIn: number): void {
    const args = [String(amount), String(permit.spec.perSeconds * 1000), String(spentIn)];
    // A charge that cannot reach Redis (it stopped answering, the script failed) is lost: the
    // call's outcome stands, and nothing of it reaches the process (reported, it would be thrown
    // outside the library when no config.onUnhandledError is set).
    this.pending.track(
      this.ask(chargeScript, [this.keyOf(permit.key)], args).then(
        (answer) => {
          const [spent, until] = parts(answer, 2);
          this.heard(permit.key, permit.spec, Number(spent), Number(until));
        },
        () => undefined,
      ),
    );
  }

  /**
   * The budgets this process has asked whose window was open at Redis's last answer and has not
   * closed since (by this machine's clock): what that window had spent then. Other processes'
   * spending since is in Redis, not here (`snapshot` on the store reads the fleet).
   */
  list(now = Date.now()): BudgetOccupancy[] {
    const open: BudgetOccupancy[] = [];
    for (const [key, budget] of this.known) {
      if (budget.until > now) open.push(budget);
      else this.known.delete(key);
    }
    return open;
  }

  // Redis's answer for budget `key`: what its window spent, and when it closes (0, or now: none open).
  private heard(key: string, spec: BudgetSpec, spent: number, until: number): void {
    const { known } = this;
    if (!(until > 0 && Number.isFinite(spent))) {
      known.delete(key);
      return;
    }
    if (known.size >= 2 * this.sweptAt + 16) this.sweptAt = this.list().length;
    known.set(key, { key, measure: spec.measure, limit: spec.limit, spent, until });
  }

  /** Resolves once every script sent has its answer. */
  idle(): Promise<void> {
    return this.pending.idle();
  }

  private keyOf(key: string): string {
    return `${laneBase(this.prefix, key)}:budget`;
  }
}
