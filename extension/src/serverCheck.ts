/** Can this interpreter import the ASAP server package? Checked before starting, so a bad venv is one clear error, not a crash loop. */
import { execFile } from 'node:child_process';

export type CheckResult = { ok: true } | { ok: false; reason: string };

/** The import the server needs first: its package and pygls, without the heavy modules behind them. */
export const IMPORT_CHECK = 'import server, pygls';

/** Run in the directory the server will run in: `-c` and `-m` both put it on sys.path. */
export function checkServerImport(python: string, cwd?: string, timeoutMs = 20_000): Promise<CheckResult> {
  return new Promise((resolve) => {
    execFile(python, ['-c', IMPORT_CHECK], { cwd, timeout: timeoutMs, windowsHide: true }, (err, _stdout, stderr) => {
      if (!err) return resolve({ ok: true });
      const e = err as NodeJS.ErrnoException & { killed?: boolean };
      if (e.code === 'ENOENT') return resolve({ ok: false, reason: `${python} does not exist` });
      if (e.killed) return resolve({ ok: false, reason: `"${python} -c '${IMPORT_CHECK}'" took longer than ${timeoutMs} ms` });
      const lastLine = stderr.trim().split('\n').pop() ?? '';
      resolve({ ok: false, reason: lastLine || String(err) });
    });
  });
}

export function notInstalledMessage(python: string, repo: string): string {
  return `ASAP's Python package is not installed in ${python}: run \`${python} -m pip install -e ${repo}\` or set asap.python.`;
}
