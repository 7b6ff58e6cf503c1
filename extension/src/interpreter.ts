/**
 * Which Python runs the ASAP server, and why.
 *
 * Order: the `asap.python` setting, the workspace `.venv`, the `.venv` of the ASAP checkout the
 * extension runs from, the server venv *ASAP: Install Server* made in the extension's global storage, the Python
 * extension's active interpreter. Every step is logged, because interpreter discovery is the first thing to look at
 * when the server does not start. `interpreterCandidates` yields them in that order, so that the client can pass over
 * a workspace `.venv` without ASAP (a MaxText checkout's own) to the next one.
 *
 * In an untrusted workspace (VS Code's Restricted Mode) nothing the workspace holds is run: its `.venv` is not
 * looked at, and any candidate inside a workspace folder (an `asap.python` of `${workspaceFolder}/...` or a relative
 * path, the Python extension's choice of the workspace's venv) is skipped, with the reason logged.
 */
import * as os from 'node:os';
import * as path from 'node:path';

import type { Logger } from './log';

export type InterpreterSource =
  | 'setting'
  | 'workspace venv'
  | 'ASAP checkout venv'
  | 'installed server'
  | 'Python extension';

export interface Interpreter {
  path: string;
  source: InterpreterSource;
}

export interface DiscoveryInputs {
  /** Raw `asap.python` value, before variable substitution. */
  setting: string;
  /** File-system paths of the open workspace folders, in order. */
  workspaceFolders: readonly string[];
  extensionPath: string;
  /** The venv *ASAP: Install Server* creates (in the extension's global storage), looked for after the checkout's. */
  installedVenv?: string;
  platform: NodeJS.Platform;
  exists(file: string): boolean;
  /** The Python extension's active interpreter, or undefined when it is absent or has none. */
  pythonExtensionInterpreter(): Promise<string | undefined>;
  log: Logger;
  /** vscode.workspace.isTrusted; false: Restricted Mode (undefined counts as trusted) */
  trusted?: boolean;
}

/** Is `file` inside one of `folders` (or one of them)? */
export function insideFolders(file: string, folders: readonly string[]): boolean {
  return folders.some((f) => {
    const rel = path.relative(f, file);
    return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
  });
}

/** `${workspaceFolder}` is the first folder (as VS Code does for single-root settings); `${userHome}` the home dir. */
export function substituteVariables(value: string, workspaceFolders: readonly string[], home = os.homedir()): string {
  return value.replace(/\$\{(workspaceFolder|userHome)\}/g, (whole, name: string) => {
    if (name === 'userHome') return home;
    return workspaceFolders[0] ?? whole;
  });
}

/** The interpreter of the venv in `venvDir`. */
export function venvInterpreter(venvDir: string, platform: NodeJS.Platform): string {
  return platform === 'win32' ? path.win32.join(venvDir, 'Scripts', 'python.exe') : path.posix.join(venvDir, 'bin', 'python');
}

export function venvPython(dir: string, platform: NodeJS.Platform): string {
  return venvInterpreter(platform === 'win32' ? path.win32.join(dir, '.venv') : path.posix.join(dir, '.venv'), platform);
}

/** The first candidate (see interpreterCandidates), or undefined with an error logged. */
export async function findInterpreter(inp: DiscoveryInputs): Promise<Interpreter | undefined> {
  for await (const found of interpreterCandidates(inp)) return found;
  return undefined;
}

/** Every interpreter that could run the server, best first, each step logged; after the last, an error line. */
export async function* interpreterCandidates(inp: DiscoveryInputs): AsyncGenerator<Interpreter> {
  const { log } = inp;
  const restricted = inp.trusted === false;
  // Restricted Mode: a candidate in the workspace is the workspace's code, run before the user trusted it
  const inWorkspace = (file: string, what: string): boolean => {
    if (!restricted || !insideFolders(file, inp.workspaceFolders)) return false;
    log.info(`Interpreter: skipping ${file} (${what}): it is inside the workspace, which is not trusted`);
    return true;
  };

  const raw = inp.setting.trim();
  if (raw) {
    let resolved = substituteVariables(raw, inp.workspaceFolders);
    if (resolved.includes('${workspaceFolder}')) {
      log.warn(`asap.python = "${raw}" uses \${workspaceFolder} but no folder is open; skipping it`);
    } else {
      // A relative path such as ".venv/bin/python" means "in the workspace"; a bare "python3" means PATH.
      const isRelativePath = /[\\/]/.test(resolved) && !path.isAbsolute(resolved) && !path.win32.isAbsolute(resolved);
      if (isRelativePath && inp.workspaceFolders[0]) resolved = path.join(inp.workspaceFolders[0], resolved);
      if (!inWorkspace(resolved, 'asap.python')) {
        log.info(`Interpreter: using ${resolved} from the asap.python setting ("${raw}")`);
        // the user's explicit choice: nothing else is tried after it (the client says why it cannot run)
        yield { path: resolved, source: 'setting' };
        return;
      }
    }
  } else {
    log.info('Interpreter: asap.python is not set');
  }

  if (restricted) log.info('Interpreter: the workspace is not trusted; not looking for its .venv');
  for (const folder of restricted ? [] : inp.workspaceFolders) {
    const candidate = venvPython(folder, inp.platform);
    if (inp.exists(candidate)) {
      log.info(`Interpreter: using ${candidate}, the venv of workspace folder ${folder}`);
      yield { path: candidate, source: 'workspace venv' };
    } else {
      log.info(`Interpreter: no venv at ${candidate}`);
    }
  }

  const checkout = venvPython(path.dirname(inp.extensionPath), inp.platform);
  if (!inp.exists(checkout)) {
    log.info(`Interpreter: no venv at ${checkout} (ASAP checkout)`);
  } else if (!inWorkspace(checkout, 'the ASAP checkout venv')) {
    log.info(`Interpreter: using ${checkout}, the venv of the ASAP checkout the extension runs from`);
    yield { path: checkout, source: 'ASAP checkout venv' };
  }

  if (inp.installedVenv) {
    const installed = venvInterpreter(inp.installedVenv, inp.platform);
    if (inp.exists(installed)) {
      log.info(`Interpreter: using ${installed}, the server venv ASAP: Install Server made`);
      yield { path: installed, source: 'installed server' };
    } else {
      log.info(`Interpreter: no server venv at ${installed} (ASAP: Install Server makes it)`);
    }
  }

  try {
    const fromExtension = await inp.pythonExtensionInterpreter();
    if (!fromExtension) {
      log.info('Interpreter: the Python extension is not installed or has no active interpreter');
    } else if (!inWorkspace(fromExtension, "the Python extension's active interpreter")) {
      log.info(`Interpreter: using ${fromExtension}, the Python extension's active interpreter`);
      yield { path: fromExtension, source: 'Python extension' };
    }
  } catch (err) {
    log.warn(`Interpreter: asking the Python extension failed: ${String(err)}`);
  }

  log.error(
    'Interpreter: none found. Set asap.python to a Python with ASAP installed, or run ASAP: Install Server (a venv of its own).',
  );
}
