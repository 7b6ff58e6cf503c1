import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { checkServerImport, compareVersions, compatible, notInstalledMessage } from '../src/serverCheck';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'asap-check-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A stand-in interpreter: a real python3 with a chosen PYTHONPATH, or any shell body. */
function fakePython(name: string, body: string): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

/** A directory holding empty Python packages with these names. */
function pythonPackages(dir: string, names: string[]): string {
  for (const name of names) {
    fs.mkdirSync(path.join(tmp, dir, name), { recursive: true });
    fs.writeFileSync(path.join(tmp, dir, name, '__init__.py'), '');
  }
  return path.join(tmp, dir);
}

describe.skipIf(process.platform === 'win32')('checkServerImport', () => {
  it('passes when the interpreter can import server and pygls', async () => {
    const site = pythonPackages('site', ['server', 'pygls']);
    const py = fakePython('good', `PYTHONPATH=${site} exec python3 "$@"`);
    // not an installed distribution (a checkout on PYTHONPATH): its version is unknown
    expect(await checkServerImport(py)).toEqual({ ok: true, version: 'unknown' });
  });

  it("reports the installed distribution's version", async () => {
    const site = pythonPackages('site-installed', ['server', 'pygls']);
    fs.mkdirSync(path.join(site, 'asap-0.3.1.dist-info'));
    fs.writeFileSync(path.join(site, 'asap-0.3.1.dist-info', 'METADATA'), 'Metadata-Version: 2.1\nName: asap\nVersion: 0.3.1\n');
    const py = fakePython('installed', `PYTHONPATH=${site} exec python3 "$@"`);
    expect(await checkServerImport(py)).toEqual({ ok: true, version: '0.3.1' });
  });

  it('names the missing dependency when only the package is there', async () => {
    const site = pythonPackages('site-no-pygls', ['server']);
    const py = fakePython('no-pygls', `PYTHONPATH=${site} exec python3 -S "$@"`);
    expect(await checkServerImport(py)).toEqual({ ok: false, reason: "ModuleNotFoundError: No module named 'pygls'" });
  });

  it('runs in the given directory, as the server will (-m puts it on sys.path)', async () => {
    const site = pythonPackages('site-pygls', ['pygls']);
    const py = fakePython('cwd', `PYTHONPATH=${site} exec python3 -S "$@"`);
    expect((await checkServerImport(py, tmp)).ok).toBe(false);
    expect(await checkServerImport(py, pythonPackages('checkout', ['server']))).toEqual({ ok: true, version: 'unknown' });
  });

  it("reports Python's own error when the package is missing", async () => {
    const py = fakePython('bare', 'exec python3 -I "$@"');
    expect(await checkServerImport(py)).toEqual({ ok: false, reason: "ModuleNotFoundError: No module named 'server'" });
  });

  it('reports a missing interpreter', async () => {
    expect(await checkServerImport('/nonexistent/bin/python')).toEqual({
      ok: false,
      reason: '/nonexistent/bin/python does not exist',
    });
  });

  it('gives up on an interpreter that hangs', async () => {
    const py = fakePython('hang', 'exec sleep 30');
    const t0 = Date.now();
    const result = await checkServerImport(py, undefined, 300);
    expect(result).toEqual({ ok: false, reason: `"${py} -c <import check>" took longer than 300 ms` });
    expect(Date.now() - t0).toBeLessThan(5000);
  });
});

describe('notInstalledMessage', () => {
  it('names the interpreter, the fix and the setting', () => {
    expect(notInstalledMessage('/v/bin/python', '/src/asap')).toBe(
      "ASAP's Python package is not installed in /v/bin/python: run `/v/bin/python -m pip install -e /src/asap` or set asap.python.",
    );
  });
});

describe('versions', () => {
  it('compares release segments, padded, ignoring suffixes', () => {
    expect(compareVersions('0.1.0', '0.1')).toBe(0);
    expect(compareVersions('0.10.0', '0.9.3')).toBeGreaterThan(0);
    expect(compareVersions('0.1.0', '0.1.1')).toBeLessThan(0);
    expect(compareVersions('1.2.0rc1', '1.2')).toBe(0);
    expect(compareVersions('unknown', '0.1.0')).toBeUndefined();
  });

  it('accepts a server of the same major.minor (or a checkout of unknown version) and refuses others', () => {
    expect(compatible('0.1.7', '0.1.0')).toBe(true);
    expect(compatible('unknown', '0.1.0')).toBe(true);
    expect(compatible('0.2.0', '0.1.0')).toBe(false);
    expect(compatible('1.1.0', '0.1.0')).toBe(false);
  });
});
