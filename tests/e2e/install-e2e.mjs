// A user's first start, with the extension installed from its VSIX and no ASAP environment anywhere (no asap.python,
// no .venv, no Python extension), driven by playwright-core.
// Usage: node install-e2e.mjs <workbench url> <screenshot dir>; env ASAP_E2E_BASE_PYTHON: the Python to pick (a path).
// The extension says it has no server and offers Install Server; the scenario accepts, picks the Python, and the
// server venv is made in the extension's global storage with the wheel the VSIX carries, pip reading the machine's
// own package index. Then a config's diagnostic reaches the Problems view and the roofline view draws its chart,
// served by the installed server. run.sh checks afterwards that the venv is where the extension says.
import { openBrowser, workbench } from './workbench.mjs';

const [url, shots] = process.argv.slice(2);
const PYTHON = process.env.ASAP_E2E_BASE_PYTHON;
const t0 = Date.now();
const log = (m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m.replace(/\s*\n\s*/g, ' ')}`);

const { browser, page } = await openBrowser();

const { palette, openFile } = workbench(page, log);
const toast = (text) => page.locator('.notification-toast', { hasText: text }).first();

try {
  if (!PYTHON) throw new Error('ASAP_E2E_BASE_PYTHON is not set (run the scenario with tests/e2e/run.sh)');
  await page.goto(url);
  await page.waitForSelector('.explorer-folders-view', { timeout: 60_000 });
  log('workbench loaded');
  await openFile('bad-mesh-v5e-256.yml'); // activates the extension (onLanguage:yaml)

  // No server anywhere: the offer, and the status item that says so
  const offer = toast('ASAP needs its Python server');
  await offer.waitFor({ timeout: 60_000 });
  log('OFFER: ' + (await offer.innerText()));
  await page.locator('.statusbar-item', { hasText: 'ASAP' }).locator('.codicon-cloud-download').first().waitFor();
  await page.screenshot({ path: `${shots}/install-offer.png` });
  await offer.locator('.monaco-button', { hasText: 'Install Server' }).click();

  // The Python for the venv: the machine's own, a row of the list found by its path (the extension host's PATH is
  // the login shell's); else entered by hand, as a user whose Python is elsewhere would
  const quickInput = page.locator('.quick-input-widget');
  await quickInput.locator('.quick-input-title', { hasText: 'Install Server: the Python for its venv' }).waitFor();
  const listed = await quickInput.locator('.quick-input-list').innerText();
  log('PYTHONS: ' + listed);
  if (!/Python 3\.\d+/.test(listed)) throw new Error(`no Python listed: ${listed}`);
  await page.keyboard.type(PYTHON);
  const pythonRow = quickInput.locator('.quick-input-list .monaco-list-row.focused', { hasText: PYTHON });
  if (await pythonRow.waitFor({ timeout: 5_000 }).then(() => true, () => false)) {
    log('PICKED: ' + (await pythonRow.innerText()));
    await page.keyboard.press('Enter');
  } else {
    await page.keyboard.press('Control+A');
    await page.keyboard.type('Enter a path');
    await quickInput.locator('.quick-input-list .monaco-list-row.focused', { hasText: 'Enter a path...' }).waitFor();
    await page.keyboard.press('Enter');
    await quickInput.locator('.quick-input-title', { hasText: 'Install Server: the Python for its venv' }).waitFor();
    await page.keyboard.type(PYTHON);
    log(`ENTERED: ${PYTHON}`);
    await page.keyboard.press('Enter');
  }

  // pip's progress as a notification, then the installed server
  const progress = toast('ASAP: installing the server');
  await progress.waitFor({ timeout: 30_000 });
  log('PROGRESS: ' + (await progress.innerText()));
  // pip's own steps in the notification (the README's picture of the install)
  const pipping = page.locator('.notification-toast', { hasText: /installing the server: (Collecting|Processing|Downloading|Installing \d+ packages)/ });
  await pipping.first().waitFor({ timeout: 60_000 });
  log('PROGRESS: ' + (await pipping.first().innerText()));
  await page.mouse.move(700, 300); // no tooltip of the button clicked before
  await page.screenshot({ path: `${shots}/install-progress.png`, animations: 'disabled' });
  const done = toast(/ASAP: server [\d.]+ installed/);
  await done.waitFor({ timeout: 300_000 });
  log('INSTALLED: ' + (await done.innerText()));

  await palette('F1', 'Focus on Problems View', 'Problems');
  const row = page.locator('.markers-panel .monaco-list-row', { hasText: /ASAP101|does not match the product/ }).first();
  await row.waitFor({ timeout: 90_000 });
  log('PROBLEM: ' + (await row.innerText()));

  await openFile('llama2-7b-v5e-256.yml');
  await palette('F1', 'ASAP: Show Roofline', 'Show Roofline');
  const view = page.frameLocator('iframe.webview').frameLocator('#active-frame');
  await view.locator('#chart svg text', { hasText: 'Roofline of v5e-256 per device' }).waitFor({ timeout: 60_000 });
  const marks = await view.locator('#chart svg g.meshes_marks > path').count();
  if (marks < 1) throw new Error('the roofline chart has no mesh point');
  log(`ROOFLINE: ${await view.locator('#status').innerText()} (${marks} mesh point(s))`);
  await page.screenshot({ path: `${shots}/install-roofline.png` });
  log('install scenario passed');
} catch (e) {
  await page.screenshot({ path: `${shots}/install-failure.png` }).catch(() => undefined);
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
