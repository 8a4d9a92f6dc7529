// The approvals page in a real browser: Debian's Chromium (playwright-core) against the page
// built on the AI SDK's chat state. The reply asks for approval on the booking's tool part; a
// click on Approve sends the answer, the booking runs once, and the model's answer shows. A
// click on Refuse books nothing. Skips only when /usr/bin/chromium is absent.
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { startApprovalsServer, type ApprovalsServer } from '../../examples/approvals/server.js';
import { CHROMIUM_PATH, hasChromium, launchChromium } from '../../examples/live/browser.js';

describe('the approvals page, in Chromium', function () {
  this.timeout(60_000);
  let browser: Browser | undefined;
  let server: ApprovalsServer | undefined;
  const errors: string[] = [];

  before(async function () {
    if (!hasChromium()) {
      console.log(`    (skipped: no browser at ${CHROMIUM_PATH})`);
      this.skip();
    }
    browser = await launchChromium();
  });

  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  after(async () => {
    await browser?.close();
  });

  async function open(): Promise<Page> {
    server = await startApprovalsServer();
    const page = await browser!.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(`uncaught: ${error.message}`));
    await page.goto(server.url);
    return page;
  }

  it('shows the approval request; a click approves it, the booking runs and the answer shows', async () => {
    const page = await open();
    await page.waitForSelector('.tool[data-call-id="b1"][data-state="approval-requested"] button.approve', { timeout: 20_000 });
    expect(await page.getAttribute('.tool[data-call-id="l1"]', 'data-state')).to.equal('output-available');
    expect(server!.booked).to.deep.equal([]);
    await page.click('button.approve');
    await page.waitForSelector('.tool[data-call-id="b1"][data-state="output-available"]', { timeout: 20_000 });
    await page.waitForSelector('#status[data-state="ready"]', { timeout: 20_000 });
    expect(await page.textContent('.tool[data-call-id="b1"] .shown')).to.equal('"booked room 7"');
    expect(await page.textContent('.message.assistant .text')).to.equal('Room 7 is booked for tonight.');
    expect(server!.booked).to.deep.equal([7]);
    expect(server!.store.size).to.equal(0);
    expect(errors).to.deep.equal([]);
    await page.close();
  });

  it('books nothing when the request is refused, and the model reads the refusal', async () => {
    const page = await open();
    await page.waitForSelector('button.refuse', { timeout: 20_000 });
    await page.click('button.refuse');
    await page.waitForSelector('.tool[data-call-id="b1"][data-state="output-denied"]', { timeout: 20_000 });
    await page.waitForSelector('.message.assistant .text', { timeout: 20_000 });
    expect(await page.textContent('.tool[data-call-id="b1"] .shown')).to.equal('not approved: refused on the page');
    expect(await page.textContent('.message.assistant .text')).to.equal('Room 7 was not booked.');
    expect(server!.booked).to.deep.equal([]);
    await page.close();
  });
});
