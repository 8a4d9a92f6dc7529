// Takes docs/live-view.png: starts the live view, opens it in headless Chromium (the same
// machinery as spec/live/liveView.spec.ts), waits until every scenario ran, and saves a
// full-page screenshot. Run it with `npm run live:screenshot`.
import { fileURLToPath } from 'node:url';
import { launchChromium } from './browser.js';
import { startLiveServer } from './server.js';

const target = fileURLToPath(new URL('../../docs/live-view.png', import.meta.url));
const live = await startLiveServer();
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
  await page.goto(live.url);
  await page.waitForSelector('#status[data-state="done"]', { timeout: 30_000 });
  await page.screenshot({ path: target, fullPage: true });
  console.log(`saved ${target}`);
} finally {
  await browser.close();
  await live.close();
}
