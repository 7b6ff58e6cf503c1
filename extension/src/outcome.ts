/** "ASAP: Record Outcome": what the applied proposal did, from a profile of the changed config. */
import * as vscode from 'vscode';

import { ERROR_CODES, errorCode, type OutcomeReply, SERVER_COMMANDS } from './contract';
import type { RunServerCommand } from './linkProfile';
import type { Logger } from './log';

/** What the one-line summary reads of the server's outcome (contract.ts OutcomeReply). */
export type Outcome = Pick<
  OutcomeReply,
  'rank' | 'predicted_step_s' | 'measured_step_s' | 'predicted_speedup' | 'measured_speedup' | 'bottleneck_before' | 'bottleneck_after'
>;

/** One line: measured against predicted, and where the bottleneck went. */
export function outcomeText(o: Outcome): string {
  const speed =
    o.measured_speedup !== null && o.predicted_speedup !== null
      ? `measured x${o.measured_speedup.toFixed(2)} against the predicted x${o.predicted_speedup.toFixed(2)}`
      : `step ${(o.measured_step_s * 1e3).toFixed(1)} ms against the predicted ${(o.predicted_step_s * 1e3).toFixed(1)} ms`;
  return `ASAP: outcome of proposal ${o.rank} recorded: ${speed}; bottleneck ${o.bottleneck_before ?? '?'} -> ${o.bottleneck_after}`;
}

export async function recordOutcome(run: RunServerCommand, log: Logger): Promise<boolean> {
  const doc = vscode.window.activeTextEditor?.document;
  if (!doc || doc.languageId !== 'yaml') {
    void vscode.window.showErrorMessage('ASAP: open the MaxText config whose proposal you ran.');
    return false;
  }
  const uri = doc.uri.toString();
  let out: unknown;
  try {
    out = await run(SERVER_COMMANDS.recordOutcome, [uri, null]);
  } catch (e) {
    if (errorCode(e) !== ERROR_CODES.noProfileLinked) {
      const why = e instanceof Error ? e.message : String(e);
      log.error(`outcome not recorded: ${why}`);
      void vscode.window.showErrorMessage(`ASAP: ${why}`);
      return false;
    }
    const picked = await vscode.window.showOpenDialog({
      canSelectFiles: true,
      canSelectFolders: true,
      canSelectMany: false,
      openLabel: 'Record Outcome',
      title: 'The profile of the run with the applied proposal (a .xplane.pb file or its run directory)',
    });
    if (!picked || picked.length === 0) return false;
    try {
      out = await run(SERVER_COMMANDS.recordOutcome, [uri, picked[0].fsPath]);
    } catch (e2) {
      const why2 = e2 instanceof Error ? e2.message : String(e2);
      log.error(`outcome not recorded: ${why2}`);
      void vscode.window.showErrorMessage(`ASAP: ${why2}`);
      return false;
    }
  }
  const text = outcomeText(out as OutcomeReply);
  log.info(text);
  void vscode.window.showInformationMessage(text);
  return true;
}
