// Headless Chromium for the live view's browser spec and its screenshot: Debian's
// /usr/bin/chromium driven by playwright-core (no browser download), with the flags that keep
// it quiet and off the network.
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Where Debian's `chromium` package puts the browser. */
export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/** Whether the browser is installed here. */
export const hasChromium = (): boolean => existsSync(CHROMIUM_PATH);

/** Launches headless Chromium; without the background-networking flags it keeps trying to reach the internet. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
