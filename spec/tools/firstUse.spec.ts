// The loop monitor and a platform's one-time cost: in a fresh process, a tool's first `fetch`
// loads Node's HTTP client inside the body (45 ms on a quiet machine, past 500 ms beside busy
// processes). With the default loopStallMs that call succeeds: a stretch in which Node loaded
// code of its own is not the body holding the loop. A tool that blocks the loop on every call
// still fails, from its first call. The machine's load is simulated (a busy-wait in the same
// stretch as the first touch of fetch), so the spec does not depend on this machine's speed.
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { runToExit } from '../childProcess.js';

const child = fileURLToPath(new URL('./firstUseChild.ts', import.meta.url));

describe('loop monitor and a first use in a fresh process', function () {
  this.timeout(30_000);

  it("lets a tool's first fetch load Node's HTTP client, however long that takes, and still fails a tool that blocks the loop on every call", async () => {
    const ending = await runToExit(child, [], 20_000);
    expect(ending.stderr).to.equal('');
    expect(ending.lines).to.deep.equal(['fetcher result "ok"', 'blocker error EventLoopStalledError', 'blocker error EventLoopStalledError']);
  });
});
