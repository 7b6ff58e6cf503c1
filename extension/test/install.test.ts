// ASAP: Install Server's steps against real interpreters: a real `python3 -m venv`, a real pip installing a wheel
// built here (a stand-in `asap` distribution with `server` and `pygls` packages and no dependencies, so that pip
// needs no index), pip's failure with its last lines, and a cancelled install.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it, vi } from 'vitest';

vi.mock('vscode', () => ({}));

import {
  carriedWheel,
  findPythons,
  InstallError,
  installServer,
  pipStep,
  pythonsOnPath,
  runStep,
  supportedPython,
  upgradeAvailable,
} from '../src/install';
import { checkServerImport } from '../src/serverCheck';
import { memoryLogger } from './helpers';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'asap-install-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A wheel `asap-<version>` holding `server` and `pygls` packages, with `requires` as its dependencies. */
function standInWheel(dir: string, version: string, requires: string[] = []): string {
  fs.mkdirSync(dir, { recursive: true });
  const script = `
import base64, hashlib, sys, zipfile
out, version, requires = sys.argv[1], sys.argv[2], sys.argv[3:]
di = f"asap-{version}.dist-info"
files = {
    "server/__init__.py": "",
    "pygls/__init__.py": "",
    f"{di}/METADATA": "Metadata-Version: 2.1\\nName: asap\\nVersion: " + version + "\\n"
        + "".join(f"Requires-Dist: {r}\\n" for r in requires),
    f"{di}/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(f"{out}/asap-{version}-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{di}/RECORD,,")
    z.writestr(f"{di}/RECORD", "\\n".join(record) + "\\n")
`;
  execFileSync('python3', ['-c', script, dir, version, ...requires]);
  return path.join(dir, `asap-${version}-py3-none-any.whl`);
}

describe('carriedWheel and upgradeAvailable', () => {
  it('finds the newest asap wheel under <extension>/wheels, and nothing without one', () => {
    const ext = path.join(tmp, 'ext');
    expect(carriedWheel(ext)).toBeUndefined();
    fs.mkdirSync(path.join(ext, 'wheels'), { recursive: true });
    for (const f of ['asap-0.9.0-py3-none-any.whl', 'asap-0.10.0-py3-none-any.whl', 'other-1.0-py3-none-any.whl']) {
      fs.writeFileSync(path.join(ext, 'wheels', f), '');
    }
    expect(carriedWheel(ext)).toEqual({ path: path.join(ext, 'wheels', 'asap-0.10.0-py3-none-any.whl'), version: '0.10.0' });
  });

  it('offers an upgrade only for a newer carried wheel and a known installed version', () => {
    const wheel = { path: '/x/asap-0.2.0-py3-none-any.whl', version: '0.2.0' };
    expect(upgradeAvailable('0.1.0', wheel)).toBe(true);
    expect(upgradeAvailable('0.2.0', wheel)).toBe(false);
    expect(upgradeAvailable('0.3.0', wheel)).toBe(false);
    expect(upgradeAvailable('unknown', wheel)).toBe(false);
    expect(upgradeAvailable('0.1.0', undefined)).toBe(false);
  });
});

describe("pip's lines as progress", () => {
  it('names the package being fetched or the count being installed, and nothing for the rest', () => {
    expect(pipStep('Collecting jax==0.10.2 (from asap==0.1.0)')).toBe('Collecting jax==0.10.2');
    expect(pipStep('  Downloading https://files.example/jaxlib-0.10.2-cp311-manylinux.whl (80.1 MB)')).toBe(
      'Downloading jaxlib-0.10.2-cp311-manylinux.whl',
    );
    expect(pipStep('Processing /home/u/.vscode/extensions/asap/wheels/asap-0.1.0-py3-none-any.whl')).toBe(
      'Processing asap-0.1.0-py3-none-any.whl',
    );
    expect(pipStep('Installing collected packages: numpy, jax, asap')).toBe('Installing 3 packages');
    expect(pipStep('Requirement already satisfied: numpy in ./lib')).toBeUndefined();
  });
});

describe.skipIf(process.platform === 'win32')('finding a Python for the venv', () => {
  it('lists each interpreter on PATH once, by its sys.executable, and skips unsupported versions', async () => {
    const bin = path.join(tmp, 'bin');
    fs.mkdirSync(bin, { recursive: true });
    const real = fs.realpathSync(execFileSync('python3', ['-c', 'import sys; print(sys.executable)']).toString().trim());
    // python3 and python: two names of one interpreter (python a link to python3); python3.12 an old Python 3.8
    fs.writeFileSync(path.join(bin, 'python3'), `#!/bin/sh\nexec ${real} "$@"\n`, { mode: 0o755 });
    fs.symlinkSync(real, path.join(bin, 'python'));
    fs.writeFileSync(
      path.join(bin, 'python3.12'),
      `#!/bin/sh\necho /opt/old/bin/python3.8; echo 3.8.18\n`,
      { mode: 0o755 },
    );
    fs.writeFileSync(path.join(bin, 'not-python'), '#!/bin/sh\n', { mode: 0o755 });
    expect(pythonsOnPath(`${bin}${path.delimiter}/nonexistent`)).toEqual([
      path.join(bin, 'python3.12'),
      path.join(bin, 'python3'),
      path.join(bin, 'python'),
    ]);
    const log = memoryLogger();
    const found = await findPythons({ envPath: bin, workspaceFolders: [], trusted: true, log });
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ path: path.join(bin, 'python3'), executable: real, origin: 'on PATH' });
    expect(supportedPython(found[0].version)).toBe(true);
    expect(log.lines).toContain(`info Install Server: ${path.join(bin, 'python3.12')} is Python 3.8.18; the server needs 3.11 or newer`);
  });

  it("offers no Python from inside an untrusted workspace", async () => {
    const ws = path.join(tmp, 'ws');
    const bin = path.join(ws, '.venv', 'bin');
    fs.mkdirSync(bin, { recursive: true });
    fs.writeFileSync(path.join(bin, 'python3'), `#!/bin/sh\nexec python3 "$@"\n`, { mode: 0o755 });
    const log = memoryLogger();
    expect(await findPythons({ envPath: bin, workspaceFolders: [ws], trusted: false, log })).toEqual([]);
    expect(await findPythons({ envPath: bin, workspaceFolders: [ws], trusted: true, log })).toHaveLength(1);
  });
});

describe.skipIf(process.platform === 'win32')('installServer', () => {
  const python = execFileSync('python3', ['-c', 'import sys; print(sys.executable)']).toString().trim();

  it('creates the venv, pip-installs the carried wheel, and checks it; an upgrade keeps the venv', async () => {
    const venvDir = path.join(tmp, 'storage', 'server-venv');
    const wheel = { path: standInWheel(path.join(tmp, 'wheels'), '0.1.0'), version: '0.1.0' };
    const lines: string[] = [];
    const steps: string[] = [];
    const py = await installServer({ python, venvDir, wheel, upgrade: false }, { line: (l) => lines.push(l) }, (m) =>
      steps.push(m),
    );
    expect(py).toBe(path.join(venvDir, 'bin', 'python'));
    expect(await checkServerImport(py, tmp)).toEqual({ ok: true, version: '0.1.0' });
    expect(steps[0]).toBe(`Creating a venv with ${python}`);
    expect(steps).toContain('Installing ASAP 0.1.0 and its dependencies');
    expect(steps).toContain('Processing asap-0.1.0-py3-none-any.whl');
    expect(lines.some((l) => l.startsWith('Successfully installed asap-0.1.0'))).toBe(true);

    // a newer wheel, as an upgrade: the same venv (a file left in it survives), ASAP 0.1.1 in it
    const marker = path.join(venvDir, 'kept');
    fs.writeFileSync(marker, '');
    const newer = { path: standInWheel(path.join(tmp, 'wheels'), '0.1.1'), version: '0.1.1' };
    const steps2: string[] = [];
    await installServer({ python: '', venvDir, wheel: newer, upgrade: true }, { line: () => undefined }, (m) => steps2.push(m));
    expect(fs.existsSync(marker)).toBe(true);
    expect(steps2[0]).toBe('Installing ASAP 0.1.1 and its dependencies');
    expect(await checkServerImport(py, tmp)).toEqual({ ok: true, version: '0.1.1' });

    // a fresh install replaces whatever was there
    await installServer({ python, venvDir, wheel, upgrade: false }, { line: () => undefined }, () => undefined);
    expect(fs.existsSync(marker)).toBe(false);
    expect(await checkServerImport(py, tmp)).toEqual({ ok: true, version: '0.1.0' });
  }, 120_000);

  it("fails with pip's last lines when a dependency cannot be found in the configured index", async () => {
    const venvDir = path.join(tmp, 'storage-missing', 'server-venv');
    const wheel = {
      path: standInWheel(path.join(tmp, 'wheels-missing'), '0.1.0', ['asap-no-such-dependency-zz==1.0']),
      version: '0.1.0',
    };
    // the user's package index, as pip reads it from the environment: none here, so the dependency is missing
    vi.stubEnv('PIP_NO_INDEX', '1');
    vi.stubEnv('PIP_FIND_LINKS', '');
    try {
      const err = await installServer({ python, venvDir, wheel, upgrade: false }, { line: () => undefined }, () => undefined).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InstallError);
      const e = err as InstallError;
      expect(e.message).toMatch(/^pip install asap-0\.1\.0-py3-none-any\.whl failed \(exit 1\): /);
      expect(e.lastLines.join('\n')).toContain('asap-no-such-dependency-zz');
    } finally {
      vi.unstubAllEnvs();
    }
  }, 120_000);

  it('is cancelled: the running step is killed and says so', async () => {
    const abort = new AbortController();
    const started = runStep('A long step', python, ['-c', 'import time; print("started", flush=True); time.sleep(60)'], {
      signal: abort.signal,
      line: (l) => {
        if (l === 'started') abort.abort();
      },
    });
    await expect(started).rejects.toThrow('A long step was cancelled');
  });

  it('says which program does not exist', async () => {
    await expect(runStep('Creating the venv', '/nonexistent/python3', ['-m', 'venv', '/x'], { line: () => undefined })).rejects.toThrow(
      'Creating the venv: /nonexistent/python3 does not exist',
    );
  });
});
