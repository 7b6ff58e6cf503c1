/** *ASAP: Install Server*: a venv of ASAP's own in the extension's global storage, with the wheel the VSIX carries.
 *
 * A user who installed the VSIX has no ASAP environment: the extension carries the matching wheel
 * (`wheels/asap-<version>-py3-none-any.whl`, put there by `make vsix`), and this command creates a venv with the Python
 * the user picks, pip-installs the wheel and its dependencies from the user's own package index (pip reads its
 * configuration and environment as in a terminal: pip.conf, PIP_INDEX_URL, proxies), checks that the new interpreter
 * imports the server at the carried version, and hands it to the client, which starts the server. The same command
 * upgrades that venv in place when the extension carries a newer wheel.
 *
 * The steps are functions of their inputs (the Python, the directories, a line sink) so that vitest runs them against
 * real interpreters; the vscode-facing part (the pick, the progress notification) is `pickPython` and `runInstall`. */
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as vscode from 'vscode';

import { insideFolders, venvInterpreter } from './interpreter';
import type { Logger } from './log';
import { checkServerImport, compareVersions } from './serverCheck';

/** The directory, in the extension's global storage, of the venv the command makes. */
export const SERVER_VENV = 'server-venv';
/** The oldest Python the server supports (pyproject.toml requires-python). */
export const MIN_PYTHON: readonly [number, number] = [3, 11];

export interface CarriedWheel {
  path: string;
  version: string;
}

/** The wheel the VSIX carries: `<extension>/wheels/asap-<version>-py3-none-any.whl` (the newest when several). Not `server/`:
 * the server runs in the extension's directory in Restricted Mode, where such a directory would be imported by
 * `python -m server` in place of the installed package (a namespace package without the server's modules). */
export function carriedWheel(extensionPath: string): CarriedWheel | undefined {
  const dir = path.join(extensionPath, 'wheels');
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return undefined;
  }
  const wheels = names
    .map((name) => ({ name, m: /^asap-([^-]+)-py3-none-any\.whl$/.exec(name) }))
    .filter((w): w is { name: string; m: RegExpExecArray } => w.m !== null)
    .map((w) => ({ path: path.join(dir, w.name), version: w.m[1] }))
    .sort((a, b) => compareVersions(b.version, a.version) ?? 0);
  return wheels[0];
}

/** Does the extension carry a newer server than the one installed in the server venv? */
export function upgradeAvailable(installedVersion: string, carried: CarriedWheel | undefined): boolean {
  if (!carried || installedVersion === 'unknown') return false;
  return (compareVersions(carried.version, installedVersion) ?? 0) > 0;
}

export interface PythonFound {
  /** what to run (as found: a PATH entry, a setting, the Python extension's) */
  path: string;
  /** its sys.executable, links resolved: two names of one interpreter (python3, python3.11, /bin and /usr/bin) are
   * one entry */
  executable: string;
  version: string;
  /** where it was found ("on PATH", "the Python extension's interpreter", ...) */
  origin: string;
}

const PROBE = 'import sys, venv; print(sys.executable); print("%d.%d.%d" % sys.version_info[:3])';

/** Run `python` to learn its executable and version; undefined when it does not run or lacks the venv module. */
export function probePython(python: string, origin: string, timeoutMs = 10_000): Promise<PythonFound | undefined> {
  return new Promise((resolve) => {
    execFile(python, ['-c', PROBE], { timeout: timeoutMs, windowsHide: true }, (err, stdout) => {
      const [executable, version] = stdout.trim().split('\n');
      if (err || !executable || !version) return resolve(undefined);
      let real = executable;
      try {
        real = fs.realpathSync(executable);
      } catch {
        // keep it as Python says
      }
      resolve({ path: python, executable: real, version, origin });
    });
  });
}

/** Is this Python new enough for the server? */
export function supportedPython(version: string): boolean {
  const c = compareVersions(version, MIN_PYTHON.join('.'));
  return c !== undefined && c >= 0;
}

/** The Python commands looked for on PATH, newest first. */
const PATH_NAMES = ['python3.14', 'python3.13', 'python3.12', 'python3.11', 'python3', 'python'];

/** Executables named like a Python on `PATH` (each directory in order, each name once per directory). */
export function pythonsOnPath(envPath: string | undefined, platform: NodeJS.Platform = process.platform): string[] {
  const found: string[] = [];
  const names = platform === 'win32' ? ['python.exe', 'py.exe'] : PATH_NAMES;
  for (const dir of (envPath ?? '').split(path.delimiter).filter(Boolean)) {
    for (const name of names) {
      const file = path.join(dir, name);
      try {
        fs.accessSync(file, fs.constants.X_OK);
        if (fs.statSync(file).isFile()) found.push(file);
      } catch {
        // not there
      }
    }
  }
  return found;
}

/** The Pythons offered for the server's venv: the Python extension's first, then PATH's; each interpreter once (by
 * its real sys.executable), supported versions only; in an untrusted workspace none from inside it. */
export async function findPythons(opts: {
  pythonExtension?: string;
  envPath: string | undefined;
  workspaceFolders: readonly string[];
  trusted: boolean;
  log: Logger;
}): Promise<PythonFound[]> {
  const candidates: [string, string][] = [];
  if (opts.pythonExtension) candidates.push([opts.pythonExtension, "the Python extension's interpreter"]);
  for (const p of pythonsOnPath(opts.envPath)) candidates.push([p, 'on PATH']);
  const probed = await Promise.all(
    candidates
      .filter(([p]) => opts.trusted || !insideFolders(p, opts.workspaceFolders))
      .map(([p, origin]) => probePython(p, origin)),
  );
  const seen = new Set<string>();
  const out: PythonFound[] = [];
  for (const found of probed) {
    if (!found || seen.has(found.executable)) continue;
    seen.add(found.executable);
    if (!supportedPython(found.version)) {
      opts.log.info(`Install Server: ${found.path} is Python ${found.version}; the server needs ${MIN_PYTHON.join('.')} or newer`);
      continue;
    }
    out.push(found);
  }
  return out;
}

/** What one line of pip's output says, for the progress notification ("Collecting jax", "Installing 84 packages"),
 * or undefined for the rest. */
export function pipStep(line: string): string | undefined {
  const collecting = /^\s*(Collecting|Downloading|Processing|Building wheel for) (\S+)/.exec(line);
  if (collecting) return `${collecting[1]} ${path.basename(collecting[2])}`;
  const installing = /^\s*Installing collected packages: (.*)$/.exec(line);
  if (installing) return `Installing ${installing[1].split(',').length} packages`;
  return undefined;
}

/** Thrown by the steps: what failed, and the last lines of the program's output. */
export class InstallError extends Error {
  constructor(
    message: string,
    readonly lastLines: string[] = [],
  ) {
    super(message);
  }
}

export interface Step {
  /** the command's lines, as they come */
  line(text: string): void;
  /** aborted: the process is killed */
  signal?: AbortSignal;
}

/** Run a program to its end, its stdout and stderr to `step.line` one line at a time; an InstallError with the last
 * 20 lines when it exits non-zero, cannot start, or is cancelled. */
export function runStep(what: string, command: string, args: string[], step: Step, env = process.env): Promise<void> {
  return new Promise((resolve, reject) => {
    const tail: string[] = [];
    const child = spawn(command, args, { env, windowsHide: true, signal: step.signal });
    const take = (stream: NodeJS.ReadableStream): void => {
      let rest = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        const lines = (rest + chunk).split(/\r?\n/);
        rest = lines.pop() ?? '';
        for (const l of lines) emit(l);
      });
      stream.on('end', () => {
        if (rest) emit(rest);
        rest = '';
      });
    };
    const emit = (l: string): void => {
      if (!l.trim()) return;
      tail.push(l);
      if (tail.length > 20) tail.shift();
      step.line(l);
    };
    take(child.stdout);
    take(child.stderr);
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.name === 'AbortError') reject(new InstallError(`${what} was cancelled`, tail));
      else reject(new InstallError(`${what}: ${err.code === 'ENOENT' ? `${command} does not exist` : err.message}`, tail));
    });
    child.on('close', (code, sig) => {
      if (code === 0) return resolve();
      if (step.signal?.aborted) return reject(new InstallError(`${what} was cancelled`, tail));
      const last = tail.at(-1) ?? '';
      reject(new InstallError(`${what} failed (${code === null ? `signal ${sig}` : `exit ${code}`})${last ? `: ${last}` : ''}`, tail));
    });
  });
}

export interface InstallPlan {
  /** the Python that creates the venv (unused when the venv exists and `upgrade` is set) */
  python: string;
  venvDir: string;
  wheel: CarriedWheel;
  /** keep the existing venv and upgrade ASAP in it (a newer carried wheel); false: a fresh venv */
  upgrade: boolean;
  platform?: NodeJS.Platform;
}

/** Create the venv (or keep it, for an upgrade), pip-install the wheel with its dependencies, check the result.
 * Returns the venv's interpreter. `progress` gets a short text per step; every line goes to `step.line`. */
export async function installServer(
  plan: InstallPlan,
  step: Step,
  progress: (message: string) => void,
): Promise<string> {
  const platform = plan.platform ?? process.platform;
  const venvPy = venvInterpreter(plan.venvDir, platform);
  const keep = plan.upgrade && fs.existsSync(venvPy);
  if (!keep) {
    // a fresh venv: what a failed or older attempt left there goes first
    fs.rmSync(plan.venvDir, { recursive: true, force: true });
    fs.mkdirSync(path.dirname(plan.venvDir), { recursive: true });
    progress(`Creating a venv with ${plan.python}`);
    await runStep(`Creating the venv (${plan.python} -m venv ${plan.venvDir})`, plan.python, ['-m', 'venv', plan.venvDir], step);
  }
  progress(`Installing ASAP ${plan.wheel.version} and its dependencies`);
  // no --quiet: pip's lines are the progress, and the output channel keeps them
  await runStep(
    `pip install ${path.basename(plan.wheel.path)}`,
    venvPy,
    ['-m', 'pip', 'install', '--upgrade', '--disable-pip-version-check', '--no-input', '--progress-bar', 'off', plan.wheel.path],
    {
      signal: step.signal,
      line: (l) => {
        step.line(l);
        const what = pipStep(l);
        if (what) progress(what);
      },
    },
    { ...process.env, PIP_NO_INPUT: '1', PYTHONUNBUFFERED: '1' },
  );
  progress('Checking the installed server');
  const check = await checkServerImport(venvPy, path.dirname(plan.venvDir), 120_000);
  if (!check.ok) throw new InstallError(`The installed server does not import: ${check.reason}`);
  if (check.version !== plan.wheel.version) {
    throw new InstallError(`The venv has ASAP ${check.version} after installing ${plan.wheel.version}`);
  }
  return venvPy;
}

const ENTER_PATH = 'Enter a path...';

/** Ask which Python creates the server's venv: the ones found, or a path the user enters. */
export async function pickPython(found: PythonFound[], log: Logger): Promise<string | undefined> {
  type Item = vscode.QuickPickItem & { python?: string };
  const items: Item[] = found.map((p) => ({
    label: `Python ${p.version}`,
    description: p.path,
    detail: p.executable === p.path ? p.origin : `${p.origin} (${p.executable})`,
    python: p.path,
  }));
  items.push({ label: ENTER_PATH, description: 'a Python 3.11 or newer of your own' });
  const picked = await vscode.window.showQuickPick(items, {
    title: 'ASAP: Install Server: the Python for its venv',
    placeHolder: found.length ? 'The server gets a venv of its own, created with this Python' : 'No Python 3.11+ found on PATH',
    matchOnDescription: true, // a path typed in finds its row
    ignoreFocusOut: true,
  });
  if (!picked) return undefined;
  if (picked.python) return picked.python;
  const typed = await vscode.window.showInputBox({
    title: 'ASAP: Install Server: the Python for its venv',
    prompt: 'The path of a Python 3.11 or newer interpreter',
    ignoreFocusOut: true,
    validateInput: async (value) => {
      if (!value.trim()) return 'A path is needed';
      const p = await probePython(value.trim(), 'entered');
      if (!p) return `${value.trim()} does not run as a Python with the venv module`;
      return supportedPython(p.version) ? undefined : `Python ${p.version}: the server needs 3.11 or newer`;
    },
  });
  if (typed) log.info(`Install Server: the user entered ${typed.trim()}`);
  return typed?.trim() || undefined;
}

/** The command's body under a cancellable progress notification. Returns the venv's interpreter, or undefined when
 * it failed or was cancelled (said to the user, pip's last lines in the log). */
export async function runInstall(plan: InstallPlan, log: Logger, showOutput: () => void): Promise<string | undefined> {
  const title = plan.upgrade ? `ASAP: upgrading the server to ${plan.wheel.version}` : 'ASAP: installing the server';
  log.info(`Install Server: ${plan.upgrade ? 'upgrading' : 'creating'} ${plan.venvDir} with ${plan.wheel.path}`);
  try {
    const python = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title, cancellable: true },
      async (progress, token) => {
        const abort = new AbortController();
        const sub = token.onCancellationRequested(() => abort.abort());
        try {
          return await installServer(plan, { line: (l) => log.info(`pip: ${l}`), signal: abort.signal }, (message) =>
            progress.report({ message }),
          );
        } finally {
          sub.dispose();
        }
      },
    );
    log.info(`Install Server: ASAP ${plan.wheel.version} is installed in ${plan.venvDir}`);
    void vscode.window.showInformationMessage(`ASAP: server ${plan.wheel.version} installed (${plan.venvDir}).`);
    return python;
  } catch (err) {
    const e = err instanceof InstallError ? err : new InstallError(String(err));
    log.error(`Install Server: ${e.message}`);
    if (e.lastLines.length) log.error(`Install Server: the last lines:\n${e.lastLines.join('\n')}`);
    const choice = await vscode.window.showErrorMessage(`ASAP: ${e.message}`, 'Show Output');
    if (choice === 'Show Output') showOutput();
    return undefined;
  }
}

/** Where the server venv lives for this extension. */
export function serverVenvDir(globalStorage: string): string {
  return path.join(globalStorage, SERVER_VENV);
}
