// The reorder: the scan that turns records in finish order into records in call order. A
// record whose outcome is decided waits here until every call before it has one; then the whole
// settled prefix goes out at once. A body that started is not an outcome, and stays here.
import type { OperatorFunction } from 'rxjs';
import { CallBody } from '../callBody.js';
import type { CallNews, CallRecord } from '../records.js';
import { Stage, staged } from '../../directSubscriber.js';

// One subscription of inCallOrder.
class InCallOrder extends Stage<CallNews, CallRecord> {
  // Decided records kept for an earlier call, by index; made when the first one is kept.
  private kept: Array<CallRecord | undefined> | undefined = undefined;
  // The index of the next call to emit.
  private following = 0;
  // The batch, known from the first record.
  private seen: CallRecord | undefined = undefined;

  protected take(news: CallNews): void {
    // A started body, or a record no stage has decided yet (one passed on before its lanes), waits for its outcome.
    if (news instanceof CallBody || news.outcome === undefined) return;
    const record = news;
    this.seen ??= record;
    const { out } = this;
    if (record.index !== this.following) {
      (this.kept ??= [])[record.index] = record;
      return;
    }
    out.next(record);
    this.following++;
    const { kept } = this;
    if (kept === undefined) return;
    // The prefix this record completed goes out with it.
    let later: CallRecord | undefined;
    while ((later = kept[this.following]) !== undefined && !out.closed) {
      kept[this.following] = undefined;
      out.next(later);
      this.following++;
    }
  }

  protected override sourceCompleted(): void {
    const expected = this.seen?.batch.size ?? this.following;
    // Every call has its outcome by now; one missing is a bug, and it must not pass silently.
    if (this.following >= expected) this.out.complete();
    else this.out.error(new Error(`internal: the batch ended with call #${this.following} unsettled`));
  }

  override unsubscribe(): void {
    this.kept = undefined;
    this.seen = undefined;
    super.unsubscribe();
  }
}
/**
 * Emits each record once its outcome is decided and every earlier call's has been emitted:
 * call order, whatever order the calls finished in, and as early as call order allows (a
 * streaming reorder, not a buffer of the whole batch). Completes when its source completes;
 * a call of the batch left without an outcome then is an error, never silence.
 *
 * ## Example
 * ```ts
 * // c finishes first, then a, then b
 * records$.pipe(inCallOrder()).subscribe((r) => console.log(r.call.callId));
 * // a, b, c: a as soon as it settles, then b and c together
 * ```
 */
export function inCallOrder(): OperatorFunction<CallNews, CallRecord> {
  return staged((out) => new InCallOrder(out));
}
