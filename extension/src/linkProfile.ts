/** "ASAP: Link Profile...": pick an XProf profile (a local file or folder, or a gs:// URL) for the config in the
 * editor; the server checks it (lists a gs:// run) and stores the link. */
import * as vscode from 'vscode';

import { SERVER_COMMANDS } from './contract';
import { type Logger, userMessage } from './log';

/** The language server's command: (config uri, profile path or null to unlink). */

export type RunServerCommand = (command: string, args: unknown[]) => Promise<unknown>;

function activeConfig(): vscode.Uri | undefined {
  const doc = vscode.window.activeTextEditor?.document;
  if (!doc || doc.uri.scheme !== 'file' || doc.languageId !== 'yaml') return undefined;
  return doc.uri;
}

const PICK_LOCAL = 'Pick a file or folder...';
const ENTER_GCS = 'Enter a gs:// URL...';

/** Why a typed gs:// URL cannot be a profile link (the input box's message), or undefined when it can. */
export function gcsUrlProblem(value: string): string | undefined {
  const v = value.trim();
  if (!/^gs:\/\//i.test(v)) return 'a Cloud Storage URL: gs://<bucket>/<run_name> (or its profile directory)';
  if (!/^gs:\/\/[^/\s]+/i.test(v)) return 'the URL names no bucket: gs://<bucket>/<run_name>';
  if (/\s/.test(v)) return 'a gs:// URL has no spaces';
  return undefined;
}

/** Ask for a profile (a .xplane.pb file, a run directory or exported tool JSON on this machine, or a gs:// URL
 * where MaxText writes its runs) and link it to the active config. */
export async function linkProfile(run: RunServerCommand, log: Logger): Promise<boolean> {
  const config = activeConfig();
  if (!config) {
    void vscode.window.showErrorMessage('ASAP: open a saved MaxText config (YAML) to link a profile to it.');
    return false;
  }
  const where = await vscode.window.showQuickPick(
    [
      { label: PICK_LOCAL, description: 'a .xplane.pb file, a run directory, or exported tool JSON' },
      { label: ENTER_GCS, description: "where MaxText writes its runs: gs://<bucket>/<run_name>" },
    ],
    { title: 'ASAP: Link an XProf profile', placeHolder: 'Where is the profile?' },
  );
  if (!where) return false;
  if (where.label === ENTER_GCS) {
    const url = await vscode.window.showInputBox({
      title: 'ASAP: Link a profile in Cloud Storage',
      prompt:
        'The newest run under it is read with your Application Default Credentials ' +
        '(gcloud auth application-default login)',
      placeHolder: 'gs://my-bucket/my-run',
      ignoreFocusOut: true,
      validateInput: gcsUrlProblem,
    });
    if (!url) return false;
    // the server lists the run in Cloud Storage first (seconds; about 30 s when it cannot be reached)
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `ASAP: looking for a profile under ${url.trim()}` },
      () => setLink(run, log, config, url.trim()),
    );
  }
  const picked = await vscode.window.showOpenDialog({
    canSelectFiles: true,
    canSelectFolders: true,
    canSelectMany: false,
    openLabel: 'Link Profile',
    title: 'Link an XProf profile: a .xplane.pb file, a run directory, or a folder of exported tool JSON',
  });
  if (!picked || picked.length === 0) return false;
  return setLink(run, log, config, picked[0].fsPath);
}

export async function unlinkProfile(run: RunServerCommand, log: Logger): Promise<boolean> {
  const config = activeConfig();
  if (!config) {
    void vscode.window.showErrorMessage('ASAP: open the MaxText config whose profile link to remove.');
    return false;
  }
  return setLink(run, log, config, null);
}

async function setLink(run: RunServerCommand, log: Logger, config: vscode.Uri, profile: string | null): Promise<boolean> {
  try {
    await run(SERVER_COMMANDS.linkProfile, [config.toString(), profile]);
    log.info(profile ? `linked ${config.fsPath} to profile ${profile}` : `removed the profile link of ${config.fsPath}`);
    return true;
  } catch (e) {
    const why = userMessage(e);
    log.error(`profile link failed: ${why}`);
    void vscode.window.showErrorMessage(`ASAP: ${why}`);
    return false;
  }
}
