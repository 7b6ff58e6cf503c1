// The VSIX as a user installs it holds every file the extension loads at run time: `vsce`'s own file listing (the
// one `vsce package` packs) over this package.json and .vscodeignore must keep the entry point package.json names
// and every script the roofline panel's HTML loads (src/roofline.ts joins them to `dist`), and leave out sources,
// tests and node_modules. Before this, the installed roofline panel had no script: .vscodeignore admitted
// dist/extension.js alone. The listing runs over a copy of the package files with the built files as placeholders,
// so it does not depend on a bundle having been built.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { listFiles, PackageManager } from '@vscode/vsce';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..');

describe('the VSIX', () => {
  it('packs every file the extension loads, and nothing of the sources', async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { main: string };
    const loaded = [pkg.main.replace(/^\.\//, ''), 'package.json', 'README.md', 'CHANGELOG.md'];
    const roofline = readFileSync(join(ROOT, 'src', 'roofline.ts'), 'utf8');
    for (const m of roofline.matchAll(/joinPath\(dist, '([^']+)'\)/g)) loaded.push(`dist/${m[1]}`);
    expect(loaded).toContain('dist/roofline.js');

    const tmp = mkdtempSync(join(tmpdir(), 'asap-vsix-'));
    for (const f of ['package.json', '.vscodeignore', 'README.md', 'CHANGELOG.md']) copyFileSync(join(ROOT, f), join(tmp, f));
    const decoys = ['src/extension.ts', 'test/client.test.ts', 'node_modules/vega/index.js', 'dist/extension.js.map'];
    for (const f of [...loaded, ...decoys]) {
      mkdirSync(dirname(join(tmp, f)), { recursive: true });
      if (!['package.json', 'README.md', 'CHANGELOG.md'].includes(f)) writeFileSync(join(tmp, f), '');
    }
    const files = await listFiles({ cwd: tmp, packageManager: PackageManager.None });
    for (const f of loaded) expect(files).toContain(f);
    for (const f of decoys) expect(files).not.toContain(f);
  });
});
