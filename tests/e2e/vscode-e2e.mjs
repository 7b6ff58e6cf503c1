// ASAP smoke scenario in real VS Code (code-server) driven by playwright-core.
// Usage: node vscode-e2e.mjs <workbench url> <screenshot dir>
// Every wait is on a selector or condition with a timeout; the whole run is bounded by run.sh.
import { existsSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { openBrowser, workbench } from './workbench.mjs';

const [url, shots] = process.argv.slice(2);
// Path: the mesh error, ASAP's MCP server listed and started from "MCP: List Servers", the error's quick fix; save; the agents' diagnosis, its hover, the roofline view, and
// "Apply proposal 1" (the view redraws); then a healthy config: its one-line code lens, no Problems entry, F12 on
// base_config into the parent, completion of a slice name after compile_topology; Verify's progress and its cancel,
// then a Verify that withdraws a proposal the compiler rejects (the MaxText stand-in: fsdp=16 does not fit); last,
// "ASAP: Link Profile..." with a gs:// URL (Cloud Storage is gcp-storage-emulator: run.sh), refused for a missing
// bucket, then the newest run of a MaxText run directory, whose profile the config's hover shows. Last, a launch
// file: a shell script's MaxText run with ASAP101 on its key=value token, its hover naming the run, the token's quick
// fix (the rest of the script kept) and the run's code lens on the command's first line.
const FILE = 'bad-mesh-v5e-256.yml';
const PROBLEM = /ASAP101|does not match the product of the ICI parallelism/;
const FIX = 'Set ici_fsdp_parallelism to 16';
const FIXED_LINE = 'ici_fsdp_parallelism: 16   # tuned by hand last week';
const HEALTHY = 'llama2-7b-v5e-256.yml';
const DEMO = 'verify-demo.yml'; // a copy of examples/llama3-8b-v6e-16.yml (run.sh)
const MAXTEXT_DIR = process.env.ASAP_E2E_MAXTEXT_DIR; // the stand-in MaxText's gate files (run.sh)
const FSDP16 = /Apply proposal \d+: fsdp=16 \(/;
const GCS_CONFIG = 'gcs-demo.yml'; // written by run.sh; its line 0 is a comment
const GCS_BUCKET = process.env.ASAP_E2E_GCS_BUCKET; // gs://<bucket>/run holds two profiled sessions (run.sh)
const GCS_OLDER = process.env.ASAP_E2E_GCS_OLDER;
const GCS_NEWER = process.env.ASAP_E2E_GCS_NEWER;
const GCS_MISSING = 'asap-e2e-missing';
const WS = new URL(url).searchParams.get('folder');
// The workspace's profile links, as the server stores them (.asap/links.json: config path -> profile).
const LINKS_FILE = `${WS}/.asap/links.json`;
const LAUNCH = 'train.sh'; // written by run.sh: `python3 -m MaxText.train ... \` then the mesh, 8 x 16 on v5e-256
const LAUNCH_FIX = 'Set ici_fsdp_parallelism to 16';
const storedLinks = () => (existsSync(LINKS_FILE) ? (JSON.parse(readFileSync(LINKS_FILE, 'utf8')).links ?? {}) : {});

const t0 = Date.now();
const log = (m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m.replace(/\s*\n\s*/g, ' ')}`);

const { browser, page } = await openBrowser();

// Scope to editor groups: newer workbenches also have a chat-input editor.
const editor = '.editor-group-container .monaco-editor';
const line = (text) => page.locator(`${editor} .view-line`, { hasText: text }).first();
const problemRow = () => page.locator('.markers-panel .monaco-list-row', { hasText: PROBLEM }).first();
// Monaco renders spaces as U+00A0.
const lineText = async (locator) => (await locator.textContent()).replace(/\u00a0/g, ' ');

const { palette, openFile } = workbench(page, log);

// The box of `text` on the view line showing it, whatever spans the grammar split the line into (a shell script's
// arguments can share one span with their neighbours): a DOM range over its characters.
async function textBox(text) {
  return line(text).evaluate((el, text) => {
    const at = el.textContent.replace(/\u00a0/g, ' ').indexOf(text);
    const range = document.createRange();
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(), seen = 0; n; seen += n.textContent.length, n = walker.nextNode()) {
      const len = n.textContent.length;
      if (seen <= at && at < seen + len) range.setStart(n, at - seen);
      if (seen < at + text.length && at + text.length <= seen + len) range.setEnd(n, at + text.length - seen);
    }
    const r = range.getBoundingClientRect();
    const { left, right, top, bottom } = r;
    return { left, right, top, bottom, x: left + r.width / 2, y: top + r.height / 2 };
  }, text);
}

// Click the anchor on the line showing `anchorLine`: a span matching a RegExp, or the characters of a string.
async function clickAnchor(anchorLine, anchor) {
  if (typeof anchor === 'string') {
    const at = await textBox(anchor);
    await page.mouse.click(at.x, at.y);
  } else {
    await line(anchorLine).locator('span', { hasText: anchor }).last().click();
  }
}

async function applyQuickFix(anchorLine, anchorSpan, fix, expectLine) {
  // Ctrl+. can race the light bulb: retry a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      await page.mouse.move(0, 0);
      await clickAnchor(anchorLine, anchorSpan);
      await page.keyboard.press('Control+.');
      const rows = page.locator('.action-widget .monaco-list-row.action');
      await rows.filter({ hasText: fix }).first().waitFor({ timeout: 5000 });
      log('QUICK FIXES: ' + (await rows.allInnerTexts()).join(' | '));
      // Walk the keyboard focus to our fix (clicking rows is unreliable); bounded by the row count.
      const n = await rows.count();
      for (let i = 0; i <= n; i++) {
        if (await page.locator('.action-widget .monaco-list-row.action.focused', { hasText: fix }).count()) break;
        if (i === n) throw new Error(`could not focus "${fix}"`);
        await page.keyboard.press('ArrowDown');
      }
      await page.keyboard.press('Enter');
      await line(expectLine).waitFor({ timeout: 5000 });
      return;
    } catch (e) {
      if (attempt >= 4) throw e;
      log(`retry quick fix (${e.message.split('\n')[0]})`);
      await page.keyboard.press('Escape');
    }
  }
}

// Hover `key` until `hover` shows. The pointer crosses other lines on its way, and a hover of an error there can open
// first and cover the key (seen in CI): close any hover, move the pointer away, and hover the key again. `inText`:
// the key's characters, not a span of its own (a shell script's `key=value`).
async function hoverKey(key, hover, inText = false) {
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press('Escape');
    await page.mouse.move(5, 5);
    if (inText) {
      const at = await textBox(key);
      await page.mouse.move(at.x, at.y);
    } else {
      await line(key).locator('span', { hasText: new RegExp(`^${key}$`) }).last().hover();
    }
    try {
      await hover.waitFor({ timeout: 8_000 });
      return;
    } catch (e) {
      if (attempt >= 4) throw e;
      log(`retry hover (${e.message.split('\n')[0]})`);
    }
  }
}

// The quick fixes offered at a key (Ctrl+., as a user would), once one of them matches `want`; the menu is closed.
async function quickFixes(anchorLine, anchorSpan, want) {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.mouse.move(0, 0);
      await line(anchorLine).locator('span', { hasText: anchorSpan }).last().click();
      await page.keyboard.press('Control+.');
      const rows = page.locator('.action-widget .monaco-list-row.action');
      await rows.filter({ hasText: want }).first().waitFor({ timeout: 5000 });
      const titles = await rows.allInnerTexts();
      await page.keyboard.press('Escape');
      await page.locator('.action-widget .monaco-list-row').first().waitFor({ state: 'hidden' });
      return titles.map((t) => t.replace(/\s*\n\s*/g, ' '));
    } catch (e) {
      if (attempt >= 4) throw e;
      log(`retry quick-fix menu (${e.message.split('\n')[0]})`);
      await page.keyboard.press('Escape');
    }
  }
}

// The Problems panel's entries of the file `name` (its rows: a file at level 1, then its entries at level 2) and the
// panel's text, once an entry matches `want` (present) or none does (!present); without `want`, as they are now.
// Evaluated in the page (self-contained).
function panelEntries({ name, want, present }) {
  const panel = document.querySelector('.markers-panel');
  if (!panel) return null;
  let file = '';
  const mine = [];
  for (const row of panel.querySelectorAll('.monaco-list-row')) {
    if (row.getAttribute('aria-level') === '1') file = row.innerText;
    else if (file.includes(name)) mine.push(row.innerText.replace(/\s*\n\s*/g, ' '));
  }
  if (want !== null && mine.some((e) => new RegExp(want).test(e)) !== present) return null;
  return { mine, all: panel.innerText.replace(/\s*\n\s*/g, ' ') };
}
async function problemsOf(name, want = null, present = true, timeout = 30_000) {
  const arg = { name, want: want === null ? null : want.source, present };
  return (await page.waitForFunction(panelEntries, arg, { timeout })).jsonValue();
}

// The text of the file at `path` once it is `want` (read on each change event; a save can be seen half written), or
// as it is after `timeout` ms.
function fileBecomes(path, want, timeout = 15_000) {
  return new Promise((resolve) => {
    let text;
    const check = () => {
      text = readFileSync(path, 'utf8');
      if (text === want) done();
    };
    const done = () => {
      watcher.close();
      clearTimeout(timer);
      resolve(text);
    };
    const watcher = watch(path, check); // before the first read: a write in between is not missed
    const timer = setTimeout(done, timeout);
    check();
  });
}

// "ASAP: Link Profile..." -> "Enter a gs:// URL..." -> the URL, as a user would.
async function linkGcsProfile(gsUrl) {
  await palette('F1', 'ASAP: Link Profile', /ASAP: Link Profile\.\.\./);
  const quickInput = page.locator('.quick-input-widget');
  await quickInput.locator('.quick-input-title', { hasText: 'Link an XProf profile' }).waitFor();
  await page.keyboard.type('gs://'); // filters the two choices to "Enter a gs:// URL..."
  await quickInput.locator('.quick-input-list .monaco-list-row.focused', { hasText: 'Enter a gs:// URL...' }).waitFor();
  await page.keyboard.press('Enter');
  await quickInput.locator('.quick-input-title', { hasText: 'Link a profile in Cloud Storage' }).waitFor();
  await page.keyboard.type(gsUrl);
  await page.keyboard.press('Enter');
  await quickInput.waitFor({ state: 'hidden' });
}

// The texts of the notifications shown from now on, collected in the page as they appear: a short one (the server
// lists a bucket in well under a second here) can come and go between two polls of a locator.
// "MCP: List Servers", the ASAP row, then one of its actions (Start Server, Show Output, ...), by the keyboard: a
// hover over the list can take the pointer.
async function mcpServerAction(action) {
  await palette('F1', 'MCP: List Servers', 'MCP: List Servers');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: 'ASAP' }).first();
  await row.waitFor({ timeout: 30_000 });
  log(`MCP SERVER listed: ${await row.innerText()}`);
  await page.keyboard.type('ASAP');
  await page.locator('.quick-input-list .monaco-list-row.focused', { hasText: 'ASAP' }).first().waitFor();
  await page.keyboard.press('Enter');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: action }).first().waitFor();
  await page.keyboard.type(action);
  await page.locator('.quick-input-list .monaco-list-row.focused', { hasText: action }).first().waitFor();
  await page.keyboard.press('Enter');
}

async function watchNotifications() {
  await page.evaluate(() => {
    const seen = new Set();
    const grab = () =>
      document.querySelectorAll('.notification-toast').forEach((t) => seen.add(t.innerText.replace(/\s*\n\s*/g, ' ')));
    const observer = new MutationObserver(grab);
    observer.observe(document.body, { childList: true, subtree: true, characterData: true });
    window.__asapNotifications = () => {
      observer.disconnect();
      return [...seen];
    };
  });
  return () => page.evaluate(() => window.__asapNotifications());
}

try {
  if (!MAXTEXT_DIR) throw new Error('ASAP_E2E_MAXTEXT_DIR is not set (run the scenario with tests/e2e/run.sh)');
  if (!GCS_BUCKET || !GCS_NEWER || !GCS_OLDER) throw new Error('ASAP_E2E_GCS_* are not set (run tests/e2e/run.sh)');
  await page.goto(url);
  await page.waitForSelector('.explorer-folders-view', { timeout: 60_000 });
  log('workbench loaded');

  await openFile(FILE);
  await line('ici_tensor_parallelism').waitFor();
  log(`opened ${FILE}`);

  await palette('F1', 'Focus on Problems View', 'Problems');
  // The first diagnostic waits for the extension to activate and the server to start.
  await problemRow().waitFor({ timeout: 90_000 });
  log('PROBLEM: ' + (await problemRow().innerText()));

  // ASAP's MCP server as VS Code's agents find it (extension/src/mcp.ts): "MCP: List Servers" lists the extension's
  // definition, `<python> -m server mcp` on the language server's interpreter (found by now); started from the list,
  // it answers VS Code's initialize and tools/list: VS Code opens its MCP output for the server, which counts the tools.
  await mcpServerAction('Start Server');
  // (\s: Monaco renders spaces as U+00A0)
  const discovered = page.locator('.part.panel .view-line', { hasText: /Discovered\s\d+\stools/ }).first();
  await discovered.waitFor({ timeout: 60_000 });
  log('MCP SERVER started: ' + (await lineText(discovered)));
  await palette('F1', 'Focus on Problems View', 'Problems');

  const hover = page.locator('.monaco-hover', { hasText: 'ici_tensor_parallelism' }).first();
  await hoverKey('ici_tensor_parallelism', hover);
  log('HOVER: ' + (await hover.innerText()));
  // The hover fades in: the screenshot (the README's first picture) waits for the end of the animation.
  await page.screenshot({ path: `${shots}/hover.png`, animations: 'disabled' });

  // On the key, inside ASAP101's range: VS Code asks for the fixes of the diagnostics under the cursor, and once
  // the agents' proposals exist a cursor off the range (on the comment) got only those (seen in CI).
  await applyQuickFix('ici_fsdp_parallelism', /^ici_fsdp_parallelism$/, FIX, 'ici_fsdp_parallelism: 16');
  const fixed = await lineText(line('ici_fsdp_parallelism'));
  if (fixed !== FIXED_LINE) throw new Error(`line 7 is ${JSON.stringify(fixed)}, expected ${JSON.stringify(FIXED_LINE)}`);
  log(`QUICK FIX applied: ${fixed}`);

  await page.locator('.markers-panel').waitFor({ state: 'visible' });
  await problemRow().waitFor({ state: 'detached', timeout: 30_000 });
  log('ASAP101 gone from the Problems panel: ' + (await page.locator('.markers-panel').innerText()));
  await page.screenshot({ path: `${shots}/fixed.png` });

  // Save: the agents analyse the valid config in the background; their diagnosis lands on the tensor key.
  await page.keyboard.press('Control+S');
  const agentRow = page.locator('.markers-panel .monaco-list-row', { hasText: /ASAP300/ }).first();
  await agentRow.waitFor({ timeout: 90_000 });
  log('AGENTS: ' + (await agentRow.innerText()));

  await page.mouse.move(0, 0);
  await line('ici_tensor_parallelism').locator('span', { hasText: /^ici_tensor_parallelism$/ }).last().hover();
  const agentHover = page.locator('.monaco-hover', { hasText: 'Confidence rests on' }).first();
  await agentHover.waitFor({ timeout: 20_000 });
  log('AGENT HOVER: ' + (await agentHover.innerText()).slice(0, 400));
  await page.screenshot({ path: `${shots}/agent-hover.png` });
  await page.keyboard.press('Escape');

  // The roofline view: now and the proposals as points with arrows from now, drawn by vega-embed in a webview.
  await palette('F1', 'ASAP: Show Roofline', 'Show Roofline');
  const view = page.frameLocator('iframe.webview').frameLocator('#active-frame');
  const chartTitle = (slice) => view.locator('#chart svg text', { hasText: `Roofline of ${slice} per device` });
  await chartTitle('v5e-256').waitFor({ timeout: 30_000 });
  const subtitle = await view.locator('#chart svg text', { hasText: 'P1: ' }).first().textContent();
  log(`ROOFLINE: ${await view.locator('#status').innerText()} | ${subtitle}`);
  // In the page: no two shown labels overlap, none covers a point; now and proposal 1 are labelled.
  const labels = await view.locator('#chart').evaluate((chart) => {
    const box = (e) => e.getBoundingClientRect();
    const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const texts = [...chart.querySelectorAll('g.mesh_labels_marks > text, g.ridge_labels_marks > text, g.op_labels_marks > text')]
      .filter((t) => t.getAttribute('visibility') !== 'hidden');
    const points = [...chart.querySelectorAll('g.meshes_marks > path, g.ops_marks > path')].map(box);
    const bad = [];
    texts.forEach((a, i) => {
      texts.slice(i + 1).forEach((b) => hit(box(a), box(b)) && bad.push(`${a.textContent} / ${b.textContent}`));
      if (points.some((p) => hit(box(a), p))) bad.push(`${a.textContent} on a point`);
    });
    return { shown: texts.map((t) => t.textContent), bad };
  });
  if (labels.bad.length) throw new Error(`roofline labels overlap: ${labels.bad.join(', ')}`);
  if (!labels.shown.includes('now') || !labels.shown.some((t) => /^P1\b/.test(t))) {
    throw new Error(`roofline labels lack now or P1: ${labels.shown.join(', ')}`);
  }
  const arrows = await view.locator('#chart g.arrows_marks > line, #chart g.arrows_marks > path').count();
  if (arrows < 1) throw new Error('no arrow from now to a proposal');
  log(`ROOFLINE labels (none overlap): ${labels.shown.join(', ')}; ${arrows} arrows from now`);
  await page.screenshot({ path: `${shots}/roofline.png` });
  // The tooltip of now: its mesh and numbers with units, inside the panel.
  await view.locator('#chart g.meshes_marks > path').first().hover();
  const tip = view.locator('#tip:not([hidden])');
  await tip.waitFor({ timeout: 10_000 });
  const tipText = (await tip.innerText()).replace(/\s*\n\s*/g, ' ');
  if (!/mesh:?\s*fsdp=16 x tensor=16/.test(tipText) || /undefined/.test(tipText) || !/FLOP\/s per device/.test(tipText)) {
    throw new Error(`roofline tooltip: ${tipText}`);
  }
  const inside = await tip.evaluate((t) => {
    const r = t.getBoundingClientRect();
    const d = document.documentElement;
    return r.left >= 0 && r.top >= 0 && r.right <= d.clientWidth && r.bottom <= d.clientHeight;
  });
  if (!inside) throw new Error('the roofline tooltip is clipped by the panel edge');
  log(`ROOFLINE tooltip: ${tipText.slice(0, 200)}`);
  await page.screenshot({ path: `${shots}/roofline-tooltip.png` });
  await page.mouse.move(5, 5);
  // A dark colour theme, picked as a user would: the chart follows it, on the editor's own background.
  await page.keyboard.press('Control+K');
  await page.keyboard.press('Control+T');
  await page.keyboard.type('Default Dark Modern');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Default Dark Modern' }).first().click();
  await view.locator('#chart[data-theme="dark"] svg.marks').waitFor({ timeout: 30_000 });
  const bg = await view.locator('#chart svg.marks').evaluate((svg) => getComputedStyle(svg).backgroundColor);
  const rgb = (bg.match(/\d+/g) ?? []).map(Number);
  if (rgb.length < 3 || rgb[0] + rgb[1] + rgb[2] > 3 * 80) throw new Error(`dark chart background is ${bg}`);
  log(`ROOFLINE redrawn in the dark palette (background ${bg})`);
  await page.screenshot({ path: `${shots}/roofline-dark.png` });
  // The panel follows the active config: another config redraws it for that one, and back.
  await openFile('llama3-8b-v6e-16.yml');
  await chartTitle('v6e-16').waitFor({ timeout: 60_000 });
  log('ROOFLINE follows the editor: llama3-8b-v6e-16.yml');
  await page.screenshot({ path: `${shots}/roofline-follow.png` });
  // back by its tab, as a user would (a second Quick Open raced the list's filtering and kept the other file)
  await page.locator('.tabs-container .tab', { hasText: FILE }).first().click();
  await line('ici_tensor_parallelism').waitFor();
  await chartTitle('v5e-256').waitFor({ timeout: 30_000 });
  log(`ROOFLINE follows the editor back: ${FILE}`);

  await applyQuickFix('ici_tensor_parallelism', /^ici_tensor_parallelism$/, 'Apply proposal 1', 'ici_fsdp_parallelism: 256');
  const mesh = await lineText(line('ici_fsdp_parallelism'));
  const tensor = await lineText(line('ici_tensor_parallelism'));
  if (mesh !== 'ici_fsdp_parallelism: 256   # tuned by hand last week') throw new Error(`fsdp line: ${JSON.stringify(mesh)}`);
  if (tensor !== 'ici_tensor_parallelism: 1') throw new Error(`tensor line: ${JSON.stringify(tensor)}`);
  log(`PROPOSAL 1 applied: ${mesh} / ${tensor}`);
  // The edit is not analysed by the agents until saved: the roofline redraws with the new mesh alone.
  await view.locator('#status', { hasText: 'proposals appear once' }).waitFor({ timeout: 30_000 });
  log('ROOFLINE redrawn for the edited mesh');
  await page.screenshot({ path: `${shots}/proposal-applied.png` });

  // A healthy config at full width: save the edited one and close every editor (and the roofline panel).
  await page.keyboard.press('Control+S');
  await palette('F1', 'View: Close All Editors', /Close All Editors(?! in Group)/);
  await page.locator('.tabs-container .tab').first().waitFor({ state: 'detached' });
  await openFile(HEALTHY);
  await line('ici_tensor_parallelism').waitFor();
  log(`opened ${HEALTHY}`);

  // The agents' answer first: the status bar shows it (from the code lens' summary; the estimate's says
  // "(estimate)"), so the Problems view below shows what they published.
  const status = page.locator('.statusbar-item', { hasText: /ASAP: \w+-bound/ }).filter({ hasNotText: /estimate|analysing/ });
  await status.first().waitFor({ timeout: 120_000 });
  log(`STATUS BAR: ${(await status.first().innerText()).trim()}`);
  // The code lens: one labelled line, its first lens 'ASAP: ...', not cut off.
  // (VS Code can keep a replaced lens row in the page, hidden: only visible rows count.)
  const lensRow = (has, not = /^$/) =>
    page.locator(`${editor} .codelens-decoration`).filter({ visible: true, hasText: has, hasNotText: not }).first();
  // The agents have answered (the status bar says so): the lens is refreshed with their line, Analyze is gone. The
  // status bar can show their answer before the lens is redrawn (seen here: the estimate's lens at that moment), so
  // wait for the redraw; a lens never refreshed fails here with what it still shows.
  const agentsLens = lensRow(/^ASAP:\s/, /analysing|\(estimate\)|\bAnalyze\b/);
  try {
    await agentsLens.waitFor({ timeout: 30_000 });
  } catch (e) {
    const still = await lensRow(/^ASAP:\s/).innerText().catch(() => '(no lens)');
    throw new Error(`the code lens still shows the estimate after the agents answered: ${still.replace(/\u00a0/g, ' ')}`);
  }
  const lens = await agentsLens.evaluate((d) => {
    const first = d.querySelector('a, span');
    const r = d.getBoundingClientRect();
    const guard = d.closest('.monaco-editor').querySelector('.overflow-guard').getBoundingClientRect();
    const lineH = d.closest('.monaco-editor').querySelector('.view-line').getBoundingClientRect().height;
    return {
      text: d.innerText.replace(/\u00a0/g, ' '),
      first: (first?.textContent ?? '').replace(/\u00a0/g, ' '),
      clipped: d.scrollWidth > d.clientWidth + 1 || r.right > guard.right + 1,
      lines: Math.round(r.height / lineH),
      width: Math.round(r.width),
      room: Math.round(guard.right - r.left),
    };
  });
  log(`CODE LENS (${lens.width} of ${lens.room} px): ${lens.text}`);
  if (!lens.first.startsWith('ASAP: ')) throw new Error(`first lens is ${JSON.stringify(lens.first)}`);
  if (lens.clipped) throw new Error(`the code lens is cut off (${lens.width} px, ${lens.room} px of room): ${lens.text}`);
  if (lens.lines > 1) throw new Error(`the code lens takes ${lens.lines} lines: ${lens.text}`);
  if (/\bAnalyze\b/.test(lens.text)) throw new Error(`the code lens still shows the estimate after the agents answered: ${lens.text}`);
  await page.screenshot({ path: `${shots}/codelens.png` });

  // A healthy file is quiet: no entry of the healthy config in Problems (information entries are hidden unless
  // asap.showInformationDiagnostics is on). The panel's rows: a file (level 1), then its entries (level 2).
  await palette('F1', 'Focus on Problems View', 'Problems');
  await page.locator('.markers-panel').waitFor({ state: 'visible' });
  const problems = await problemsOf(HEALTHY);
  log(`PROBLEMS: ${problems.all.slice(0, 300)}`);
  if (problems.mine.length) throw new Error(`${HEALTHY} is not quiet in Problems: ${problems.mine.join(' | ')}`);
  log(`QUIET: no Problems entry for ${HEALTHY}`);
  await page.screenshot({ path: `${shots}/quiet.png` });

  // Go to definition: F12 on base_config's value opens the parent config.
  await page.mouse.move(0, 0);
  await line('base_config').locator('span', { hasText: /common\.yml/ }).last().click();
  await page.keyboard.press('F12');
  await page.locator('.tabs-container .tab.active', { hasText: 'common.yml' }).waitFor({ timeout: 20_000 });
  await line('run_name: asap-example').waitFor();
  log('DEFINITION: F12 on base_config opened common.yml');
  await page.screenshot({ path: `${shots}/definition.png` });
  await page.locator('.tabs-container .tab', { hasText: HEALTHY }).first().click();
  await line('ici_tensor_parallelism').waitFor();

  // Verify's progress: a notification (not status-bar text) with the step and the time elapsed, whose Cancel stops
  // the compile (every compile of the stand-in MaxText is held: run.sh). The lens says "compiling…" meanwhile and
  // offers Verify again after the cancel.
  await palette('F1', 'ASAP: Verify with TPU Compiler', 'Verify with TPU Compiler');
  const toast = page.locator('.notification-toast', { hasText: 'ASAP: TPU compiler' });
  await toast.waitFor({ timeout: 30_000 });
  await toast.filter({ hasText: /elapsed ([2-9]|\d\d) s|elapsed \d+ min/ }).waitFor({ timeout: 15_000 }); // it moves
  log(`PROGRESS: ${(await toast.innerText()).replace(/\s*\n\s*/g, ' ')}`);
  if (await page.locator('.statusbar-item', { hasText: 'TPU compiler' }).count()) {
    throw new Error('the TPU compiler progress is also shown in the status bar');
  }
  await lensRow('TPU compiler: compiling').waitFor({ timeout: 15_000 });
  await page.screenshot({ path: `${shots}/progress.png` });
  await toast.locator('.monaco-button', { hasText: 'Cancel' }).first().click();
  await toast.waitFor({ state: 'detached', timeout: 10_000 });
  const again = lensRow(/\|\s+Verify\s+\|/, 'compiling');
  await again.waitFor({ timeout: 30_000 });
  const lensNow = (await again.innerText()).replace(/\u00a0/g, ' ');
  log(`PROGRESS cancelled: the lens offers Verify again: ${lensNow}`);

  // Completion: a new line 'compile_topology: ' lists the slices; v6e-16 accepted is written.
  await line('ici_tensor_parallelism').click();
  await page.keyboard.press('Control+End');
  await page.keyboard.press('Enter');
  await page.keyboard.type('compile_topology: ');
  const suggest = page.locator('.suggest-widget.visible');
  const rows = suggest.locator('.monaco-list-row');
  await rows.first().waitFor({ timeout: 20_000 });
  log('COMPLETION: ' + (await rows.allInnerTexts()).slice(0, 8).map((t) => t.replace(/\s*\n\s*/g, ' ')).join(' | '));
  // 'v6e16' narrows the list to v6e-16 alone (VS Code's fuzzy match), so a late redraw of the list cannot move the
  // focus onto another slice, and what accepting writes differs from what was typed.
  await page.keyboard.type('v6e16');
  const want = rows.filter({ has: page.locator('.label-name', { hasText: /^v6e-16$/ }) }).first();
  await want.waitFor({ timeout: 10_000 });
  const n = await rows.count();
  const focusedWant = rows.filter({ has: page.locator('.label-name', { hasText: /^v6e-16$/ }) }).and(page.locator('.focused'));
  for (let i = 0; i <= n; i++) {
    if (await focusedWant.count()) break;
    if (i === n) throw new Error('could not focus the v6e-16 suggestion');
    await page.keyboard.press('ArrowDown');
  }
  log('COMPLETION focused: ' + (await suggest.locator('.monaco-list-row.focused').innerText()).replace(/\s*\n\s*/g, ' '));
  await page.screenshot({ path: `${shots}/completion.png` });
  await page.keyboard.press('Enter');
  await suggest.waitFor({ state: 'hidden' });
  // the editor redraws the accepted line after the widget hides: wait for the line as accepted (a rendering of the
  // typed 'v6e16' read before the redraw failed this check twice while the file already held v6e-16)
  const accepted = page.locator(`${editor} .view-line`).filter({ hasText: /^compile_topology:\s+v6e-16\s*$/ });
  await accepted.first().waitFor({ timeout: 10_000 }).catch(() => {});
  const written = await page.locator(`${editor} .view-line`).filter({ hasText: /^compile_topology:\s+v6e/ }).last();
  const got = (await lineText(written)).trimEnd();
  if (got !== 'compile_topology: v6e-16') {
    const all = (await page.locator(`${editor} .view-lines`).innerText()).replace(/\u00a0/g, ' ');
    throw new Error(`completion wrote ${JSON.stringify(got)}; the file: ${JSON.stringify(all)}`);
  }
  log(`COMPLETION accepted: ${got}`);

  // Verify withdraws a proposal the compiler rejects: on a copy of the demo, whose agents propose fsdp=16, the
  // stand-in MaxText reports libtpu's out-of-memory for fsdp=16 (tests/support/fake_maxtext.py). Its gates are lifted
  // first (no `hold`; `release` lets the proposals' compiles finish), so this Verify runs to its end.
  await openFile(DEMO);
  await line('ici_data_parallelism').waitFor();
  const before = lensRow(/^ASAP:\s.*\b3 proposals \(best ×/, 'withdrawn');
  await before.waitFor({ timeout: 120_000 }); // the agents' answer: Verify compiles their proposals
  log(`opened ${DEMO}; CODE LENS: ${(await before.innerText()).replace(/\u00a0/g, ' ')}`);
  const offered = await quickFixes('ici_data_parallelism', /^ici_data_parallelism$/, FSDP16);
  log('QUICK FIXES before Verify: ' + offered.join(' | '));
  rmSync(`${MAXTEXT_DIR}/hold`, { force: true });
  writeFileSync(`${MAXTEXT_DIR}/release`, '');
  await palette('F1', 'ASAP: Verify with TPU Compiler', 'Verify with TPU Compiler');
  // (1) the code lens, once the verification is done: the withdrawn proposal counted, the current mesh's verdict.
  const withdrawnRe = /\b(\d+) withdrawn\b/;
  const after = lensRow(withdrawnRe);
  await after.waitFor({ timeout: 120_000 });
  const lensAfter = (await after.innerText()).replace(/\u00a0/g, ' ').replace(/\s*\n\s*/g, ' ');
  log(`VERIFY: CODE LENS: ${lensAfter}`);
  if (!/\bTPU compiler: fits\b/.test(lensAfter)) {
    throw new Error(`the code lens lacks the current mesh's verdict: ${lensAfter}`);
  }
  const fitsAfter = await after.evaluate((d) => {
    const r = d.getBoundingClientRect();
    const guard = d.closest('.monaco-editor').querySelector('.overflow-guard').getBoundingClientRect();
    return { clipped: d.scrollWidth > d.clientWidth + 1 || r.right > guard.right + 1, width: Math.round(r.width) };
  });
  if (fitsAfter.clipped) throw new Error(`the code lens after Verify is cut off (${fitsAfter.width} px): ${lensAfter}`);
  await page.screenshot({ path: `${shots}/verify-withdrawn.png` });
  // (2) no quick fix applies fsdp=16 any more; the ones offered fit by the compiler.
  const left = await quickFixes('ici_data_parallelism', /^ici_data_parallelism$/, /Apply proposal \d+: .*fits \(TPU compiler\)/);
  log('VERIFY: QUICK FIXES: ' + left.join(' | '));
  if (left.some((t) => FSDP16.test(t))) throw new Error(`a withdrawn proposal is still offered: ${left.join(' | ')}`);
  // (3) the diagnosis' hover on the mesh key it implicates names the withdrawn mesh and the compiler's words.
  const withdrawnHover = page.locator('.monaco-hover', { hasText: 'Withdrawn: fsdp=16' }).first();
  await hoverKey('ici_tensor_parallelism', withdrawnHover);
  const hoverText = (await withdrawnHover.innerText()).replace(/\s*\n\s*/g, ' ');
  if (!/Withdrawn: fsdp=16 \(TPU compiler: [^)]*39\.8/.test(hoverText)) throw new Error(`verify hover: ${hoverText}`);
  log(`VERIFY: HOVER: ${hoverText.slice(0, 120)} … ${hoverText.slice(hoverText.indexOf('Withdrawn:'), hoverText.indexOf('Withdrawn:') + 300)}`);
  await page.keyboard.press('Escape');

  // The team's path: the profile of a MaxText run in Cloud Storage. A missing bucket first: the server's reason in
  // an error notification, and no link stored.
  await openFile(GCS_CONFIG);
  const gcsComment = line('# A MaxText config whose profile is a run in Cloud Storage');
  await gcsComment.waitFor();
  log(`opened ${GCS_CONFIG}`);
  await linkGcsProfile(`gs://${GCS_MISSING}/run`);
  const refused = page.locator('.notification-toast', { hasText: `bucket '${GCS_MISSING}' not found` }).first();
  await refused.waitFor({ timeout: 60_000 });
  log(`GCS REFUSED: ${(await refused.innerText()).replace(/\s*\n\s*/g, ' ')}`);
  // The listing's notification closes with the refusal: the screenshot shows the error alone, slid in.
  await page.locator('.notification-toast', { hasText: `looking for a profile under gs://${GCS_MISSING}` })
    .waitFor({ state: 'hidden', timeout: 10_000 });
  await page.screenshot({ path: `${shots}/gcs-refused.png`, animations: 'disabled' });
  if (GCS_CONFIG in storedLinks()) throw new Error(`a refused URL was stored: ${JSON.stringify(storedLinks())}`);
  await palette('F1', 'Notifications: Clear All Notifications', 'Clear All Notifications');
  await refused.waitFor({ state: 'detached' });

  // The run directory, as MaxText's base_output_directory/run_name: the server lists its profiled sessions (the
  // extension's notification meanwhile), stores the URL as typed, and reads the newest session's profile.
  const runUrl = `gs://${GCS_BUCKET}/run`;
  const notifications = await watchNotifications();
  await linkGcsProfile(runUrl);
  // The linked profile's report is the hover of line 0 (where a link from the links file is anchored), once the
  // server has downloaded and converted it: hover the start of that line until it shows.
  const profileHover = page.locator('.monaco-hover', { hasText: /Profile: \w+-bound/ }).first();
  const gcsDeadline = Date.now() + 90_000;
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press('Escape');
    await page.mouse.move(5, 5);
    const box = await gcsComment.locator('span').first().boundingBox();
    await page.mouse.move(box.x + 2, box.y + box.height / 2);
    try {
      await profileHover.waitFor({ timeout: 3_000 });
      break;
    } catch (e) {
      if (Date.now() > gcsDeadline) throw new Error(`no profile hover on line 0 of ${GCS_CONFIG} after ${attempt} tries`);
    }
  }
  const profileText = (await profileHover.innerText()).replace(/\s*\n\s*/g, ' ');
  log(`GCS PROFILE HOVER: ${profileText.slice(0, 400)}`);
  await page.screenshot({ path: `${shots}/gcs-linked.png`, animations: 'disabled' });
  const shown = await notifications();
  log(`GCS NOTIFICATIONS: ${shown.join(' | ')}`);
  if (!shown.some((t) => t.includes(`ASAP: looking for a profile under ${runUrl}`))) {
    throw new Error(`no progress notification while the server listed ${runUrl}: ${shown.join(' | ')}`);
  }
  const newest = `${runUrl}/tensorboard/plugins/profile/${GCS_NEWER}`;
  if (!profileText.includes(`Source: XProf profile ${newest} (2 hosts`) || profileText.includes(GCS_OLDER)) {
    throw new Error(`the hover is not the newest session's profile (${newest}): ${profileText}`);
  }
  if (!/Profile: communication-bound/.test(profileText)) throw new Error(`profile verdict: ${profileText}`);
  const stored = storedLinks();
  if (stored[GCS_CONFIG] !== runUrl) throw new Error(`links file: ${JSON.stringify(stored)}, expected ${runUrl}`);
  log(`GCS LINKED: ${LINKS_FILE} has ${GCS_CONFIG} -> ${stored[GCS_CONFIG]}`);
  await page.keyboard.press('Escape');

  // A launch file, in the same editor and server: VS Code knows train.sh as a shell script by its extension, and
  // ASAP's client is active for shell scripts too.
  const script = readFileSync(`${WS}/${LAUNCH}`, 'utf8');
  await openFile(LAUNCH);
  await line('ici_fsdp_parallelism=8').waitFor();
  await page.locator('[id="status.editor.mode"]', { hasText: 'Shell Script' }).waitFor();
  log(`opened ${LAUNCH} (Shell Script)`);
  // (4, before the fix) the run's code lens, on the command's first line, says what stops its estimate. Waited for
  // while the editor has the focus: VS Code cancels a pending code lens request when the editor loses it (the
  // Problems view below), and asks again only when it gets the focus back.
  const errorLens = lensRow(/^ASAP:\s.*\brun 1: 1 error\b/);
  await errorLens.waitFor({ timeout: 30_000 });
  log(`LAUNCH CODE LENS before the fix: ${(await errorLens.innerText()).replace(/\u00a0/g, ' ')}`);
  // (1) ASAP101 in Problems at the token (line 5, column 5: past the continuation line's indent), squiggled under the
  // key of `ici_fsdp_parallelism=8` (a diagnostic on another line or token would be elsewhere).
  await palette('F1', 'Focus on Problems View', 'Problems');
  const launchProblems = await problemsOf(LAUNCH, /ASAP101.*\[Ln 5, Col 5\]/);
  log(`LAUNCH PROBLEM: ${launchProblems.mine.join(' | ')}`);
  await page.locator(`${editor} .squiggly-error`).first().waitFor();
  const key = await textBox('ici_fsdp_parallelism');
  const tokenBox = await textBox('ici_fsdp_parallelism=8');
  const squiggles = await page.locator(`${editor} .squiggly-error`).evaluateAll((els) =>
    els.map((e) => e.getBoundingClientRect()).map(({ left, right, top, bottom }) => ({ left, right, top, bottom })));
  const under = squiggles.filter((r) => r.top < key.bottom && r.bottom > key.top);
  if (under.length !== 1 || Math.abs(under[0].left - key.left) > 2 || under[0].right < key.right - 2 ||
    under[0].right > tokenBox.right + 2) {
    throw new Error(`squiggles ${JSON.stringify(squiggles)} are not under the token ${JSON.stringify(tokenBox)}`);
  }
  // (2) the hover on the token: the server's part names the run and the diagnostic
  const launchHover = page.locator('.monaco-hover .markdown-hover', { hasText: /ASAP · run 1\b/ }).first();
  await hoverKey('ici_fsdp_parallelism', launchHover, true);
  const launchHoverText = (await launchHover.innerText()).replace(/\s*\n\s*/g, ' ');
  if (!/\bASAP101\b/.test(launchHoverText)) throw new Error(`the launch hover lacks ASAP101: ${launchHoverText}`);
  const runAt = launchHoverText.indexOf('ASAP · run 1');
  log(`LAUNCH HOVER: ${launchHoverText.slice(0, 120)} … ${launchHoverText.slice(runAt, runAt + 300)}`);
  await page.screenshot({ path: `${shots}/launch-hover.png` });
  // (3) the quick fix writes the token in place, and the rest of the script is kept
  await applyQuickFix('ici_fsdp_parallelism', 'ici_fsdp_parallelism', LAUNCH_FIX, 'ici_fsdp_parallelism=16');
  log(`LAUNCH QUICK FIX applied: ${(await lineText(line('ici_fsdp_parallelism'))).trim()}`);
  await page.locator('.markers-panel').waitFor({ state: 'visible' });
  const launchAfter = await problemsOf(LAUNCH, /ASAP101/, false);
  await page.locator(`${editor} .squiggly-error`).first().waitFor({ state: 'detached' });
  log(`ASAP101 gone for ${LAUNCH} (Problems and squiggle): ${launchAfter.mine.join(' | ') || 'no entry'}`);
  // (4) the run's estimate, on the command's first line (between the export line and the python3 line)
  const estimateLens = lensRow(/^ASAP:\s.*\bMFU \d+%/);
  await estimateLens.waitFor({ timeout: 30_000 });
  const lensBox = await estimateLens.boundingBox();
  const exportBox = await line('export LIBTPU_INIT_ARGS').boundingBox();
  const commandBox = await line('python3 -m MaxText.train').boundingBox();
  if (lensBox.y < exportBox.y + exportBox.height - 1 || lensBox.y + lensBox.height > commandBox.y + 1) {
    throw new Error(`the run's lens is not over the command's first line: ${JSON.stringify({ lensBox, commandBox })}`);
  }
  log(`LAUNCH CODE LENS: ${(await estimateLens.innerText()).replace(/\u00a0/g, ' ')}`);
  // The file as saved: VS Code saves a file a code action's edit changed (files.refactoring.autoSave), Ctrl+S where
  // it did not. The tab is not marked dirty while it saves, so the disk is watched for the text instead.
  await page.keyboard.press('Control+S');
  const wantScript = script.replace(' ici_fsdp_parallelism=8 ', ' ici_fsdp_parallelism=16 ');
  const savedScript = await fileBecomes(`${WS}/${LAUNCH}`, wantScript);
  if (wantScript === script || savedScript !== wantScript) {
    throw new Error(`${LAUNCH} after the fix: ${JSON.stringify(savedScript)}, expected ${JSON.stringify(wantScript)}`);
  }
  log(`LAUNCH SAVED: only the token changed; the comment, the export and the continuation kept`);
  log('PASS');
} catch (e) {
  console.error('FAIL', e);
  await page.screenshot({ path: `${shots}/failure.png` }).catch(() => {});
  process.exitCode = 1;
} finally {
  await browser.close();
}
