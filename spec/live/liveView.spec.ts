// The live lane view in a real browser: Debian's Chromium driven by playwright-core against the
// live server on 127.0.0.1. The page loads without a console error, bars appear while the
// scenarios are still running, and for every scenario the rows (grouped by lane) and their
// outcomes match the transcript the page was streamed, in call order. Skips only when
// /usr/bin/chromium is absent.
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM_PATH, hasChromium, launchChromium } from '../../examples/live/browser.js';
import { startLiveServer, type LiveServer } from '../../examples/live/server.js';
import { scenarios } from '../../examples/scenarios.js';

interface Row {
  readonly callId: string;
  readonly index: number;
  readonly lane: string;
  readonly outcome: string | undefined;
  readonly run?: { from: number; to: number };
  readonly wait?: { from: number; to: number };
}

const outcomeOf: Record<string, string> = { TOOL_RESULT: 'result', TOOL_ERROR: 'error', TOOL_INDETERMINATE: 'indeterminate' };

describe('the live lane view, in Chromium', function () {
  this.timeout(60_000);
  let live: LiveServer | undefined;
  let browser: Browser | undefined;
  let page: Page;
  // Whether a bar was on the page before the last scenario had run.
  let barsWhileRunning = false;
  // What the page logged as errors (a failed request for a favicon is one), and what it threw.
  const consoleErrors: string[] = [];
  // Reads the page with a script given as text: the spec is compiled without DOM types, and
  // functions passed to the page must not carry the compiler's helpers.
  const read = <T>(expression: string): Promise<T> => page.evaluate(expression) as Promise<T>;

  before(async function () {
    if (!hasChromium()) {
      console.log(`    (skipped: no browser at ${CHROMIUM_PATH}; install Debian's chromium package, as .ci/run does)`);
      this.skip();
    }
    live = await startLiveServer();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(`${message.text()} (${message.location().url})`);
    });
    page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
    await page.goto(live.url);
    await page.waitForSelector('.bar', { timeout: 20_000 });
    barsWhileRunning = (await page.getAttribute('#status', 'data-state')) !== 'done';
    await page.waitForSelector('#status[data-state="done"]', { timeout: 30_000 });
  });

  after(async () => {
    await browser?.close();
    await live?.close();
  });

  it('loads the page and runs every scenario of the worked example', async () => {
    expect(await page.textContent('h1')).to.equal('agent-lanes · live lane view');
    expect(await page.textContent('#status')).to.equal(`all ${scenarios.length} scenarios ran`);
    const titles = await read<string[]>(`[...document.querySelectorAll('.scenario h2')].map((node) => node.firstChild.textContent)`);
    expect(titles).to.deep.equal(scenarios.map((s, i) => `${i + 1}. ${s.title}`));
  });

  it('logs no error to the console while it loads and runs every scenario (no missing favicon)', () => {
    expect(consoleErrors).to.deep.equal([]);
  });

  it('draws bars as the calls happen, before the scenarios are done', () => {
    expect(barsWhileRunning).to.equal(true);
  });

  for (const [index, scenario] of scenarios.entries()) {
    it(`scenario ${index + 1}: one row per call, grouped by lane, in the transcript's call order with its outcomes`, async () => {
      const section = `.scenario[data-index="${index}"]`;
      const rows = await read<Row[]>(`[...document.querySelectorAll('${section} .row')].map((node) => {
        const bar = (kind) => { const b = node.querySelector('.bar.' + kind); return b ? { from: Number(b.dataset.from), to: Number(b.dataset.to) } : undefined; };
        return { callId: node.dataset.callId, index: Number(node.dataset.index), lane: node.dataset.lane, outcome: node.dataset.outcome, run: bar('run'), wait: bar('wait') };
      })`);
      const transcript = await read<Array<{ callId: string; type: string }>>(
        `[...document.querySelectorAll('${section} .transcript li')].map((node) => ({ callId: node.dataset.callId, type: node.dataset.type }))`,
      );

      // The transcript is in call order: the ids the model asked for, in its order.
      const asked = (scenario.turn.toolCalls ?? []).map((call) => call.id);
      expect(transcript.map((entry) => entry.callId)).to.deep.equal(asked);
      // One row per call; by call index, the rows read as the transcript does.
      expect([...rows].sort((a, b) => a.index - b.index).map((row) => row.callId)).to.deep.equal(asked);
      // Grouped by lane: a lane's rows are together and in call order.
      const lanes = [...new Set(rows.map((row) => row.lane))];
      const grouped = lanes.flatMap((lane) => rows.filter((row) => row.lane === lane));
      expect(rows.map((row) => row.callId), 'each lane group is contiguous').to.deep.equal(grouped.map((row) => row.callId));
      for (const lane of lanes) {
        const order = rows.filter((row) => row.lane === lane).map((row) => row.index);
        expect(order, `rows of ${lane}`).to.deep.equal([...order].sort((a, b) => a - b));
      }
      const toolOf = new Map((scenario.turn.toolCalls ?? []).map((call) => [call.id, call.name]));
      for (const row of rows) expect(row.lane).to.equal(`tool:${toolOf.get(row.callId)}`);
      // Each row's outcome is its transcript event's; each dispatched call has a finished run bar.
      for (const entry of transcript) {
        const row = rows.find((r) => r.callId === entry.callId)!;
        expect(row.outcome, `outcome of ${entry.callId}`).to.equal(outcomeOf[entry.type]);
        expect(row.run, `run bar of ${entry.callId}`).to.not.equal(undefined);
        expect(row.run!.to).to.be.at.least(row.run!.from);
      }
    });
  }

  it('shows the calls the turn lane held back waiting, then running after the first two (scenario 2)', async () => {
    const rows = await read<unknown[]>(`[...document.querySelectorAll('.scenario[data-index="1"] .row')].map((node) =>
      ({ callId: node.dataset.callId, waited: node.querySelector('.bar.wait') !== null, note: node.querySelector('.note').textContent }))`);
    expect(rows).to.deep.equal([
      { callId: 'c1', waited: false, note: '' },
      { callId: 'c2', waited: false, note: '' },
      { callId: 'c3', waited: true, note: 'waited on turn' },
      { callId: 'c4', waited: true, note: 'waited on turn' },
    ]);
  });

  it('shows the order-dependent booking running alone: after the calls before it, before the call after it (scenario 5)', async () => {
    const run = (callId: string) =>
      read<{ from: number; to: number }>(`(() => { const bar = document.querySelector('.scenario[data-index="4"] .row[data-call-id="${callId}"] .bar.run');
        return { from: Number(bar.dataset.from), to: Number(bar.dataset.to) }; })()`);
    const [c1, c2, booking, c4] = await Promise.all(['c1', 'c2', 'c3', 'c4'].map(run));
    expect(booking!.from).to.be.at.least(Math.max(c1!.to, c2!.to));
    expect(c4!.from).to.be.at.least(booking!.to);
  });
});
