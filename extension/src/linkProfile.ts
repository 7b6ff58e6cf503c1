/** "ASAP: Link Profile...": pick an XProf profile for the config in the editor; the server stores the link. */
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

/** Ask for a profile (a .xplane.pb file, a run directory or exported tool JSON) and link it to the active config. */
export async function linkProfile(run: RunServerCommand, log: Logger): Promise<boolean> {
  const config = activeConfig();
  if (!config) {
    void vscode.window.showErrorMessage('ASAP: open a saved MaxText config (YAML) to link a profile to it.');
    return false;
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
