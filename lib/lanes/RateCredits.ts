// The starts an in-process rate lane counted from their slot rather than from when they came (its
// own timer let them go late: RateLane.started), each kept while a window of `perSeconds` after it
// is open. The start `span` (limit + burst - 1) places after a kept one waits until that window
// ends, so no window holds more starts than the rate allows. Plain arrays with a moving head: a
// lane keeps at most `RateCredits.most`, and a lane of a higher rate counts the rest as they came.

/** A rate lane's starts counted before they came, while their windows are open. */
export class RateCredits {
  // Each kept start's number among the lane's starts, and when it came; kept ones before `head` are forgotten.
  private readonly index: number[] = [];
  private readonly at: number[] = [];
  private head = 0;
  // The rate's window (ms) and how many starts it holds (limit + burst - 1).
  private window = 0;
  private span = 0;

  /** The rate changed: its window is `perSeconds`, holding `limit + burst - 1` starts. */
  setRate(perSeconds: number, limit: number, burst: number): void {
    this.window = perSeconds * 1000;
    this.span = limit + burst - 1;
  }

  /** True once any start was kept (and not all forgotten by `bound`). */
  get any(): boolean {
    return this.at.length > 0;
  }

  /** True while the window after the last start kept is open at `now`. */
  open(now: number): boolean {
    const { at } = this;
    return at.length > this.head && at[at.length - 1]! + this.window > now;
  }

  /**
   * Keeps start number `index`, which came at `at`, counted before it came: the start `span`
   * places after it must come a window after it. False when as many are kept as may be (it is
   * then counted as it came).
   */
  keep(index: number, at: number): boolean {
    if (this.at.length - this.head >= RateCredits.most) return false;
    this.index.push(index);
    this.at.push(at);
    return true;
  }

  /**
   * The earliest time start number `next` may come by the windows of the starts kept: it waits
   * for the window of every kept start `span` places before it. Windows that ended are forgotten.
   */
  bound(now: number, next: number): number {
    const { index, at, window } = this;
    let head = this.head;
    while (head < at.length && at[head]! + window <= now) head++;
    if (head === at.length) {
      index.length = 0;
      at.length = 0;
      head = 0;
    } else if (head > 64 && head * 2 > at.length) {
      index.splice(0, head);
      at.splice(0, head);
      head = 0;
    }
    this.head = head;
    const last = next - this.span;
    let bound = Number.NEGATIVE_INFINITY;
    for (let i = head; i < at.length && index[i]! <= last; i++) bound = at[i]! + window;
    return bound;
  }

  // How many starts counted before they came a lane keeps at most.
  private static readonly most = 4096;
}
