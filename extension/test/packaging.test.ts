// The VSIX as a user installs it holds every file the extension loads at run time: `vsce`'s own file listing (the
// one `vsce package` packs) over this package.json and .vscodeignore must keep the entry point package.json names
// and every script the roofline panel's HTML loads (src/roofline.ts joins them to `dist`), and leave out sources,
// tests and node_modules. Before this, the installed roofline panel had no script: .vscodeignore admitted
// dist/extension.js alone. The listing runs over a copy of the package files with the built files as placeholders,
// so it does not depend on a bundle having been built. The VSIX also carries the icon, the licence, the notices of
// the bundled npm code and the server wheel of its own version (`make vsix` stages them; scripts/prepackage.mjs and
// scripts/notices.mjs, run by `npm run package`, check and write them: their tests are here too).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { listFiles, PackageManager } from '@vscode/vsce';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..');

describe('the VSIX', () => {
  it('packs every file the extension loads, and nothing of the sources', async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { main: string; icon: string; version: string };
    const loaded = [pkg.main.replace(/^\.\//, ''), 'package.json', 'README.md', 'CHANGELOG.md'];
    // the client looks for the wheel as wheels/asap-*-py3-none-any.whl in the installed extension
    loaded.push(pkg.icon, 'LICENSE', 'THIRD_PARTY_NOTICES.md', `wheels/asap-${pkg.version}-py3-none-any.whl`);
    const roofline = readFileSync(join(ROOT, 'src', 'roofline.ts'), 'utf8');
    for (const m of roofline.matchAll(/joinPath\(dist, '([^']+)'\)/g)) loaded.push(`dist/${m[1]}`);
    expect(loaded).toContain('dist/roofline.js');

    const tmp = mkdtempSync(join(tmpdir(), 'asap-vsix-'));
    for (const f of ['package.json', '.vscodeignore', 'README.md', 'CHANGELOG.md']) copyFileSync(join(ROOT, f), join(tmp, f));
    const decoys = ['src/extension.ts', 'test/client.test.ts', 'node_modules/vega/index.js', 'dist/extension.js.map'];
    decoys.push('dist/extension.meta.json', 'images/icon.svg', 'scripts/notices.mjs', 'server/README.md');
    for (const f of [...loaded, ...decoys]) {
      mkdirSync(dirname(join(tmp, f)), { recursive: true });
      if (!['package.json', 'README.md', 'CHANGELOG.md'].includes(f)) writeFileSync(join(tmp, f), '');
    }
    const files = await listFiles({ cwd: tmp, packageManager: PackageManager.None });
    for (const f of loaded) expect(files).toContain(f);
    for (const f of decoys) expect(files).not.toContain(f);
    // In Restricted Mode the server runs in the extension's directory (`python -m server` puts it first on sys.path):
    // a top-level server/ or pygls/ there would be imported in place of the installed packages (seen: the wheel
    // carried in server/ broke the restricted code-server scenario with "cannot import name '__version__'").
    expect(files.filter((f) => /^(server|pygls)(\/|\.py$)/.test(f))).toEqual([]);
  });
});

// `node SCRIPT ARGS` in `cwd`: its exit status and stderr
function node(script: string, args: string[], cwd: string): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', script), ...args], { cwd, encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

describe('the packaged versions', () => {
  it('are one release: pyproject.toml (the wheel) and package.json (the extension) name the same version', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const pyproject = readFileSync(join(ROOT, '..', 'pyproject.toml'), 'utf8');
    const project = pyproject.split(/^\[/m).find((s) => s.startsWith('project]'));
    expect(project).toBeDefined();
    expect(/^version\s*=\s*"([^"]+)"/m.exec(project!)?.[1]).toBe(pkg.version);
  });

  it('stop the packaging when they differ or when wheels/ lacks that wheel, and stage the licence when they agree', () => {
    const repo = mkdtempSync(join(tmpdir(), 'asap-prepackage-'));
    const ext = join(repo, 'extension');
    write(join(ext, 'package.json'), JSON.stringify({ name: 'asap', version: '1.2.0' }));
    write(join(repo, 'LICENSE'), 'All rights reserved.\n');
    write(join(repo, 'pyproject.toml'), '[project]\nname = "asap"\nversion = "1.1.0"\n\n[tool.x]\nversion = "1.2.0"\n');
    write(join(ext, 'wheels', 'asap-1.2.0-py3-none-any.whl'), '');
    let r = node('prepackage.mjs', [], ext);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("pyproject.toml's version is 1.1.0, package.json's 1.2.0");
    expect(existsSync(join(ext, 'LICENSE'))).toBe(false);

    write(join(repo, 'pyproject.toml'), '[project]\nname = "asap"\nversion = "1.2.0"\n');
    write(join(ext, 'wheels', 'asap-1.1.0-py3-none-any.whl'), ''); // an older wheel left beside the new one
    r = node('prepackage.mjs', [], ext);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('wheels/ must hold exactly asap-1.2.0-py3-none-any.whl');

    rmSync(join(ext, 'wheels', 'asap-1.1.0-py3-none-any.whl'));
    r = node('prepackage.mjs', [], ext);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(join(ext, 'LICENSE'), 'utf8')).toBe('All rights reserved.\n');
  });
});

describe('the third-party notices', () => {
  // an esbuild metafile: each output's inputs with the bytes they put in it
  function metafile(inputs: Record<string, number>): string {
    const entries = Object.entries(inputs).map(([path, bytesInOutput]) => [path, { bytesInOutput }]);
    return JSON.stringify({ inputs: {}, outputs: { 'dist/out.js': { inputs: Object.fromEntries(entries) } } });
  }

  function pkg(dir: string, name: string, license: string, files: Record<string, string>): void {
    write(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', license }));
    for (const [f, text] of Object.entries(files)) write(join(dir, f), text);
  }

  it('list every package with code in the bundle, with its licence texts', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'asap-notices-'));
    pkg(join(tmp, 'node_modules/plain'), 'plain', 'MIT', { LICENSE: 'MIT text of plain' });
    pkg(join(tmp, 'node_modules/@scope/nested'), '@scope/nested', 'BSD-3-Clause', { 'LICENSE.md': 'BSD text' });
    pkg(join(tmp, 'node_modules/@scope/nested/node_modules/inner'), 'inner', 'ISC', {
      'License.txt': 'ISC text with ``` fences',
      NOTICE: 'inner notice',
    });
    pkg(join(tmp, 'node_modules/shaken'), 'shaken', 'MIT', { LICENSE: 'shaken text' });
    write(join(tmp, 'a.json'), metafile({
      'src/extension.ts': 900,
      'node_modules/plain/index.js': 10,
      'node_modules/@scope/nested/lib/a.js': 5,
    }));
    write(join(tmp, 'b.json'), metafile({
      'node_modules/@scope/nested/node_modules/inner/x.js': 7,
      'node_modules/plain/other.js': 3,
      'node_modules/shaken/index.js': 0, // tree-shaken away: not in the bundle
    }));
    const r = node('notices.mjs', ['NOTICES.md', 'a.json', 'b.json'], tmp);
    expect(r.status).toBe(0);
    const text = readFileSync(join(tmp, 'NOTICES.md'), 'utf8');
    const headings = [...text.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(headings).toEqual(['@scope/nested@1.0.0', 'inner@1.0.0', 'plain@1.0.0']);
    for (const t of ['MIT text of plain', 'BSD text', 'inner notice', 'Licence: BSD-3-Clause']) expect(text).toContain(t);
    expect(text).toContain('````\nISC text with ``` fences\n````'); // a fence longer than the text's own
    expect(text).not.toContain('shaken');
  });

  it('fail, naming the package, when a bundled package has no licence file', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'asap-notices-'));
    pkg(join(tmp, 'node_modules/plain'), 'plain', 'MIT', { LICENSE: 'MIT text' });
    pkg(join(tmp, 'node_modules/bare'), 'bare', 'MIT', { 'README.md': 'no licence here' });
    write(join(tmp, 'a.json'), metafile({ 'node_modules/plain/index.js': 10, 'node_modules/bare/index.js': 10 }));
    const r = node('notices.mjs', ['NOTICES.md', 'a.json'], tmp);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('bundled packages without a licence file: bare@1.0.0 (node_modules/bare)');
    expect(existsSync(join(tmp, 'NOTICES.md'))).toBe(false);
  });
});
