// ASAP in VS Code's Restricted Mode (workspace trust on, the folder not trusted), driven by playwright-core.
// Usage: node restricted-e2e.mjs <workbench url> <screenshot dir>
// The extension must run there (package.json: untrustedWorkspaces "limited"): a config's static diagnostic reaches
// the Problems view, and the status bar says once what is off until the folder is trusted. run.sh checks afterwards
// that the workspace's own .venv/bin/python (a trap) never ran. Every wait has a timeout; run.sh bounds the run.
import { openBrowser, workbench } from './workbench.mjs';

const [url, shots] = process.argv.slice(2);
const FILE = 'bad-mesh-v5e-256.yml';
const PROBLEM = /ASAP101|does not match the product of the ICI parallelism/;
const t0 = Date.now();
const log = (m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m.replace(/\s*\n\s*/g, ' ')}`);

const { browser, page } = await openBrowser();

const { palette, openFile } = workbench(page, log);

try {
  await page.goto(url);
  await page.waitForSelector('.explorer-folders-view', { timeout: 60_000 });
  log('workbench loaded');
  // VS Code's own sign of Restricted Mode (its status bar entry), so the check below is not vacuous
  await page.locator('.statusbar-item', { hasText: 'Restricted Mode' }).first().waitFor({ timeout: 30_000 });
  log('the workbench is in Restricted Mode');

  await openFile(FILE);
  await palette('F1', 'Focus on Problems View', 'Problems');
  const row = page.locator('.markers-panel .monaco-list-row', { hasText: PROBLEM }).first();
  await row.waitFor({ timeout: 90_000 }); // the extension activates and the server starts, untrusted
  log('PROBLEM: ' + (await row.innerText()));

  const item = page.locator('.statusbar-item', { hasText: 'ASAP: restricted' }).first();
  await item.waitFor({ timeout: 15_000 });
  const label = (await item.locator('a').first().getAttribute('aria-label')) ?? '';
  log(`STATUS: ${await item.innerText()} (${label})`);
  // The item moves when the one left of it (the server's verdict) grows as the agents finish: a pointer placed
  // before that rests on the neighbour, whose tooltip shows instead (seen). Hover the item where it is now, again.
  const tip = page.locator('.monaco-hover, .hover-contents', { hasText: 'Off until you trust it' }).first();
  for (let attempt = 1; ; attempt++) {
    await item.hover();
    if (await tip.waitFor({ timeout: 5_000 }).then(() => true, () => false)) break;
    if (attempt === 3) throw new Error("the restricted item's tooltip did not show after three hovers");
    log('hover the restricted item again (the status bar moved under the pointer)');
    await page.mouse.move(700, 300);
  }
  const tooltip = await tip.innerText();
  log('TOOLTIP: ' + tooltip);
  for (const off of ['workspace interpreter', 'Verify', 'Claude']) {
    if (!tooltip.includes(off)) throw new Error(`the restricted item's tooltip does not name ${off}: ${tooltip}`);
  }
  await page.screenshot({ path: `${shots}/restricted.png` });
  log('restricted scenario passed');
} catch (e) {
  await page.screenshot({ path: `${shots}/restricted-failure.png` }).catch(() => undefined);
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
