/** Can this interpreter run ASAP's server, and is it a version this extension speaks to? Checked before starting, so
 * a bad venv is one clear error (and an offer to install the server), not a crash loop. */
import { execFile } from 'node:child_process';

export type CheckResult = { ok: true; version: string } | { ok: false; reason: string };

/** The imports the server needs first (its package and pygls, without the heavy modules behind them), then the
 * installed distribution's version: "unknown" when `server` is imported from a directory that is not installed
 * (a checkout on PYTHONPATH). */
export const IMPORT_CHECK = [
  'import server, pygls',
  'try:',
  '    from importlib.metadata import version',
  "    print(version('asap'))",
  'except Exception:',
  "    print('unknown')",
].join('\n');

/** Run in the directory the server will run in: `-c` and `-m` both put it on sys.path. */
export function checkServerImport(python: string, cwd?: string, timeoutMs = 20_000): Promise<CheckResult> {
  return new Promise((resolve) => {
    execFile(python, ['-c', IMPORT_CHECK], { cwd, timeout: timeoutMs, windowsHide: true }, (err, stdout, stderr) => {
      if (!err) return resolve({ ok: true, version: stdout.trim().split('\n').pop() || 'unknown' });
      const e = err as NodeJS.ErrnoException & { killed?: boolean };
      if (e.code === 'ENOENT') return resolve({ ok: false, reason: `${python} does not exist` });
      if (e.killed) return resolve({ ok: false, reason: `"${python} -c <import check>" took longer than ${timeoutMs} ms` });
      const lastLine = stderr.trim().split('\n').pop() ?? '';
      resolve({ ok: false, reason: lastLine || String(err) });
    });
  });
}

/** A version's numeric release segments ("0.10.2" -> [0, 10, 2]; a pre/dev/local suffix is ignored). */
function release(version: string): number[] | undefined {
  const m = /^v?(\d+(?:\.\d+)*)/.exec(version.trim());
  return m ? m[1].split('.').map(Number) : undefined;
}

/** <0, 0 or >0 as a is older than, the same release as, or newer than b (release segments only, PEP 440 padding:
 * "1.0" equals "1.0.0"). Undefined when either is not a version. */
export function compareVersions(a: string, b: string): number | undefined {
  const x = release(a);
  const y = release(b);
  if (!x || !y) return undefined;
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The server and the extension speak one protocol (commands, settings, code lens titles) per minor release: a
 * server of another major.minor is refused. "unknown" (a checkout that is not installed) is accepted: the developer's
 * own server. */
export function compatible(serverVersion: string, extensionVersion: string): boolean {
  if (serverVersion === 'unknown') return true;
  const s = release(serverVersion);
  const e = release(extensionVersion);
  return !!s && !!e && s[0] === e[0] && (s[1] ?? 0) === (e[1] ?? 0);
}

export function incompatibleReason(serverVersion: string, extensionVersion: string): string {
  const [major, minor] = release(extensionVersion) ?? [0, 0];
  return `it has ASAP ${serverVersion}; this extension (${extensionVersion}) needs ${major}.${minor ?? 0}.x`;
}

export function notInstalledMessage(python: string, repo: string): string {
  return `ASAP's Python package is not installed in ${python}: run \`${python} -m pip install -e ${repo}\` or set asap.python.`;
}
