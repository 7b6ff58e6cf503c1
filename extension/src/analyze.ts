/** "ASAP: Analyze": run the agents (diagnosis and proposals) on the config in the editor now. */
import * as vscode from 'vscode';

import { SERVER_COMMANDS } from './contract';
import type { RunServerCommand } from './linkProfile';
import type { Logger } from './log';


export async function analyzeActive(run: RunServerCommand, log: Logger): Promise<boolean> {
  const doc = vscode.window.activeTextEditor?.document;
  if (!doc || doc.languageId !== 'yaml') {
    void vscode.window.showErrorMessage('ASAP: open a MaxText config (YAML) to analyze it.');
    return false;
  }
  try {
    await run(SERVER_COMMANDS.runAgents, [doc.uri.toString()]);
    log.info(`analysis started for ${doc.uri.fsPath}; results arrive as diagnostics (ASAP300) and quick fixes`);
    return true;
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    log.error(`analysis failed to start: ${why}`);
    void vscode.window.showErrorMessage(`ASAP: ${why}`);
    return false;
  }
}

/** "ASAP: Verify with TPU Compiler": compile the current mesh and the proposals for the slice, in the background. */
export async function verifyActive(run: RunServerCommand, log: Logger): Promise<boolean> {
  const doc = vscode.window.activeTextEditor?.document;
  if (!doc || doc.languageId !== 'yaml') {
    void vscode.window.showErrorMessage('ASAP: open a MaxText config (YAML) to verify it.');
    return false;
  }
  try {
    await run(SERVER_COMMANDS.verify, [doc.uri.toString()]);
    log.info(`TPU compiler started for ${doc.uri.fsPath}; its verdict arrives as a diagnostic (ASAP400/401)`);
    return true;
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    log.error(`verification failed to start: ${why}`);
    void vscode.window.showErrorMessage(`ASAP: ${why}`);
    return false;
  }
}
