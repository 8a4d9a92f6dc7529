// The live lane view draws an adaptive lane's limit changes: a partner that says slow down for
// one call halves the lane's limit, and the page marks it on that call's row and writes the new
// limit on the lane's label. Debian's Chromium against the live server; skips without it.
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM_PATH, hasChromium, launchChromium } from '../../examples/live/browser.js';
import { startLiveServer, type LiveServer } from '../../examples/live/server.js';
import { calls } from '../../examples/scenarios.js';
import { ConcurrencyConfig } from '../../lib/index.js';

describe('the live lane view, an adaptive lane', function () {
  this.timeout(60_000);
  let live: LiveServer | undefined;
  let browser: Browser | undefined;
  let page: Page;

  before(async function () {
    if (!hasChromium()) {
      console.log(`    (skipped: no browser at ${CHROMIUM_PATH})`);
      this.skip();
    }
    live = await startLiveServer({
      scenarios: [
        {
          title: 'A partner that says slow down (perToolAdaptive.partner_lookup = 1..4)',
          turn: calls(['partner_lookup', 'Lisbon'], ['partner_lookup', 'Atlantis'], ['partner_lookup', 'Porto'], ['partner_lookup', 'Madrid']),
          runner: new ConcurrencyConfig({ perToolAdaptive: { partner_lookup: { min: 1, max: 4 } } }),
        },
      ],
    });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(live.url);
    await page.waitForSelector('#status[data-state="done"]', { timeout: 30_000 });
  });

  after(async () => {
    await browser?.close();
    await live?.close();
  });

  it("marks the fall on the row of the call that was told to slow down, and writes the limit on the lane's label", async () => {
    const marks = await page.evaluate(`[...document.querySelectorAll('.row')].flatMap((row) =>
      [...row.querySelectorAll('.limit-mark')].map((mark) => ({ callId: row.dataset.callId, limit: mark.dataset.limit, fell: mark.classList.contains('fell') })))`);
    expect(marks).to.deep.include({ callId: 'c2', limit: '2', fell: true });
    const label = await page.textContent('.lane-label[data-lane="tool:partner_lookup"]');
    expect(label).to.match(/^lane tool:partner_lookup · limit \d \(was \d, (overload|success)\)$/);
    expect(await page.textContent('.row[data-call-id="c2"] .note')).to.not.equal('');
  });
});
