// Driving VS Code's workbench in code-server with playwright-core: what the scenarios (vscode-e2e.mjs,
// restricted-e2e.mjs, install-e2e.mjs) do the same way. `openBrowser()` starts Debian's chromium headless with one
// 1400 x 900 page (the README's screenshots); `workbench(page, log)` binds the helpers to that page and its log.
import { chromium } from 'playwright-core';

export async function openBrowser() {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(15_000);
  return { browser, page };
}

export function workbench(page, log) {
  // Run a command of a quick pick (F1: the command palette, Control+P: Quick Open) by its row.
  async function palette(key, text, row) {
    await page.keyboard.press(key);
    await page.keyboard.type(text);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: row }).first().waitFor();
    await page.keyboard.press('Enter');
  }

  // Quick Open a workspace file. Enter opens the focused row, and the list can still show the rows of the previous
  // filter when the file's row appears (seen: Quick Open of llama2-7b-v5e-256.yml opened llama3-8b-v6e-16.yml), so
  // wait until the focused row is the file's, check the active tab, and try again if another file opened.
  async function openFile(name) {
    const tab = page.locator('.tabs-container .tab.active', { hasText: name }).first();
    for (let attempt = 1; ; attempt++) {
      try {
        await page.keyboard.press('Control+P');
        await page.keyboard.type(name);
        await page.locator('.quick-input-list .monaco-list-row.focused', { hasText: name }).first().waitFor();
        await page.keyboard.press('Enter');
        await tab.waitFor({ timeout: 5_000 });
        return;
      } catch (e) {
        if (attempt >= 3) throw e;
        log(`retry Quick Open of ${name} (${e.message.split('\n')[0]})`);
        await page.keyboard.press('Escape');
      }
    }
  }

  return { palette, openFile };
}
