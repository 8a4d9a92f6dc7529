// A loan: a permit its holder lends to the nested work it waits on (a tool body's sub-agent).
// One borrower at a time runs in the lent permit. A borrower that finds it busy waits for it
// to come back or for a free permit of the lane itself, whichever comes first, so nested work
// never waits only on a permit its own caller holds (no deadlock), and the lane's bound holds
// across the whole tree of runs: the lent permit is counted once, by the lane, whoever runs in it.
import { grant, type OnGrant } from './Lane.js';
import type { LaneStore, Permit } from './LaneTable.js';

// Where a borrow stands.
type BorrowState = 'waiting' | 'holding' | 'left';

/** One borrower's request for a lent permit; `leave()` gives it back, or withdraws the request. */
class BorrowedPermit implements Permit {
  state: BorrowState = 'waiting';
  constructor(
    private readonly loan: Loan,
    readonly onGrant: OnGrant,
  ) {}

  get holding(): boolean {
    return this.state === 'holding';
  }

  /** The lent permit's fencing token: a borrower runs under its lender's grant. */
  get fence(): string | undefined {
    return this.loan.fence;
  }

  leave(): void {
    this.loan.leave(this);
  }
}

/**
 * A permit of lane `key`, lent by whoever holds it to nested work. Made by the lender; the
 * lender calls `recall` instead of leaving its permit, and the permit goes back to the
 * lane once no borrower runs in it.
 */
export class Loan {
  // The borrower running in the permit, if any.
  private holder: BorrowedPermit | undefined = undefined;
  // Borrowers waiting for it, oldest first.
  private waiting: BorrowedPermit[] = [];
  // Set once the lender wants its permit back: what gives it back, once no borrower runs in it.
  private recalled: (() => void) | undefined = undefined;
  private closed = false;

  /** @param fence the lent permit's fencing token, if its store gives one */
  constructor(
    readonly key: string,
    readonly fence?: string,
  ) {}

  /** Asks for the lent permit; `onGrant` may be told before this returns. Refused (never granted) once recalled. */
  borrow(onGrant: OnGrant): Permit {
    const borrow = new BorrowedPermit(this, onGrant);
    if (this.closed) {
      borrow.state = 'left';
      return borrow;
    }
    if (this.holder === undefined) {
      borrow.state = 'holding';
      this.holder = borrow;
      grant(onGrant);
    } else this.waiting.push(borrow);
    return borrow;
  }

  /** @internal use `borrow.leave()` */
  leave(borrow: BorrowedPermit): void {
    if (borrow.state === 'left') return;
    const held = borrow.state === 'holding';
    borrow.state = 'left';
    if (!held) {
      this.waiting = this.waiting.filter((other) => other !== borrow);
      return;
    }
    this.holder = undefined;
    if (this.closed) return this.endRecall();
    const next = this.waiting.shift();
    if (next === undefined) return;
    next.state = 'holding';
    this.holder = next;
    grant(next.onGrant);
  }

  /**
   * The lender is done with its permit: `leave` returns it to the lane now, or once the
   * borrower running in it leaves. Waiting borrowers lose this way in (they still wait on the lane).
   */
  recall(leave: () => void): void {
    if (this.closed) return;
    this.closed = true;
    this.recalled = leave;
    for (const borrow of this.waiting) borrow.state = 'left';
    this.waiting = [];
    if (this.holder === undefined) this.endRecall();
  }

  private endRecall(): void {
    const leave = this.recalled;
    this.recalled = undefined;
    leave?.();
  }
}

/**
 * A permit of lane `key` for nested work whose caller lent one: the lent permit if it is free,
 * else whichever comes first of the lent permit and a free permit of the lane. The other
 * request is withdrawn as soon as one is granted.
 */
class LoanOrLanePermit implements Permit {
  // The request to the loan, and the one to the store (made only if the loan was busy).
  private borrowed: Permit;
  private lanePermit: Permit | undefined = undefined;
  // Which one granted, once one did.
  private via: 'loan' | 'lane' | undefined = undefined;
  private left = false;

  constructor(loan: Loan, store: LaneStore, key: string, limit: number, party: string, private readonly onGrant: OnGrant) {
    this.borrowed = loan.borrow({ granted: () => this.from('loan') });
    if (this.via !== undefined || this.left) return;
    // A function carrying lost(): a store shared by a fleet can say the request was lost, and a
    // store that only calls functions still works with it.
    const onLane = Object.assign(() => this.from('lane'), { lost: (error: Error) => this.lost(error) });
    this.lanePermit = store.enter(key, limit, onLane, party);
    // A grant from the lane before enter returned could not withdraw the permit it had not yet seen.
    if (this.via === 'lane') this.borrowed.leave();
  }

  get holding(): boolean {
    return this.via !== undefined && !this.left;
  }

  get fence(): string | undefined {
    if (this.via === 'loan') return this.borrowed.fence;
    return this.via === 'lane' ? this.lanePermit?.fence : undefined;
  }

  // The lane's request was lost (a fleet store's lease): a borrower in the lent permit is not
  // concerned; one that waits, or runs in the lane's permit, is told.
  private lost(error: Error): void {
    if (this.via === 'loan' || this.left) return;
    const { lost } = this.onGrant as { lost?: (error: Error) => void };
    if (typeof lost === 'function') lost.call(this.onGrant, error);
  }

  private from(via: 'loan' | 'lane'): void {
    if (this.via !== undefined || this.left) return;
    this.via = via;
    if (via === 'loan') this.lanePermit?.leave();
    else this.borrowed.leave();
    grant(this.onGrant);
  }

  leave(): void {
    if (this.left) return;
    this.left = true;
    this.borrowed.leave();
    this.lanePermit?.leave();
  }
}

/** Asks for a permit of lane `key` in `store`, or the one `loan` lends, whichever is free first. */
export function enterWithLoan(loan: Loan, store: LaneStore, key: string, limit: number, onGrant: OnGrant, party = ''): Permit {
  return new LoanOrLanePermit(loan, store, key, limit, party, onGrant);
}
