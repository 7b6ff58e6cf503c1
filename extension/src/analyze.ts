/** "ASAP: Analyze": run the agents (diagnosis and proposals) on the config in the editor now. */
import * as vscode from 'vscode';

import { CLIENT_COMMANDS, SERVER_COMMANDS } from './contract';
import type { RunServerCommand } from './linkProfile';
import { type Logger, userMessage } from './log';


export async function analyzeActive(run: RunServerCommand, log: Logger): Promise<boolean> {
  const doc = vscode.window.activeTextEditor?.document;
  if (!doc || doc.languageId !== 'yaml') {
    void vscode.window.showErrorMessage('ASAP: open a MaxText config (YAML) to analyze it.');
    return false;
  }
  const uri = doc.uri.toString();
  let report: unknown;
  try {
    // The server reports progress while it runs; its answer is the `asap analyze --json` document.
    report = await run(SERVER_COMMANDS.analyze, [uri]);
    // The same analysis (from ASAP's store) as the editor's diagnosis, code lens and quick fixes.
    await run(SERVER_COMMANDS.runAgents, [uri]);
  } catch (e) {
    const why = userMessage(e);
    log.error(`analysis of ${doc.uri.fsPath} failed: ${why}`);
    void vscode.window.showErrorMessage(`ASAP: analysis failed: ${why}`);
    return false;
  }
  const summary = analysisSummary(report);
  log.info(`analysis of ${doc.uri.fsPath}: ${summary.text}`);
  const actions = summary.proposals > 0 ? [SHOW_PROPOSALS] : [];
  void vscode.window.showInformationMessage(`ASAP: ${summary.text}`, ...actions).then((choice) => {
    if (choice === SHOW_PROPOSALS) {
      const line = meshLine(doc.getText());
      void vscode.commands.executeCommand(CLIENT_COMMANDS.showProposals, uri, line, 0);
    }
  });
  return true;
}

const SHOW_PROPOSALS = 'Show Proposals';

/** The first line of the mesh block (where the server offers the proposals' quick fixes), else 0. */
export function meshLine(text: string): number {
  const i = text.split(/\r\n|\r|\n/).findIndex((l) => /^(ici|dcn)_\w+_parallelism\s*:/.test(l));
  return Math.max(0, i);
}

interface Proposal {
  rank?: number;
  keep_current?: boolean;
  ici?: Record<string, number>;
  dcn?: Record<string, number>;
  other_changes?: Record<string, unknown>;
  confidence?: number;
  expected?: { speedup?: number | null; mfu?: number };
}

function pct(x: unknown): string {
  return typeof x === 'number' ? `${Math.round(x * 100)}%` : '?';
}

function meshLabel(p: Proposal): string {
  const axes = (m: Record<string, number> | undefined) =>
    Object.entries(m ?? {})
      .filter(([, v]) => v !== 1)
      .map(([k, v]) => `${k}=${v}`)
      .join(' x ');
  const ici = axes(p.ici);
  const dcn = axes(p.dcn);
  const other = Object.entries(p.other_changes ?? {}).map(([k, v]) => `${k}: ${String(v)}`);
  return [ici, dcn ? `DCN ${dcn}` : '', ...other].filter(Boolean).join('; ') || 'the mesh';
}

/** What an analysis found, in one or two sentences, with every number labelled: the diagnosis, then proposal 1
 * (or "keep this mesh", or what would fit when nothing does). */
export function analysisSummary(report: unknown): { text: string; proposals: number } {
  const r = (report ?? {}) as {
    diagnosis?: { bottleneck?: string; confidence?: number } | null;
    proposals?: Proposal[];
    nothing_fits?: { summary?: string } | null;
  };
  const d = r.diagnosis;
  const verdict = d?.bottleneck
    ? `${d.bottleneck}-bound (confidence ${pct(d.confidence)})`
    : 'no diagnosis (fix the config errors first)';
  const props = (r.proposals ?? []).filter((p) => !p.keep_current);
  if ((r.proposals ?? []).some((p) => p.keep_current)) {
    return { text: `${verdict}; no clearly better mesh: keep this one.`, proposals: 0 };
  }
  if (props.length > 0) {
    const p = props[0];
    const sp = p.expected?.speedup;
    const gain = typeof sp === 'number' ? `expected x${sp.toFixed(2)}` : `MFU ${pct(p.expected?.mfu)}`;
    const more = props.length > 1 ? `; ${props.length - 1} more as quick fixes` : '';
    return {
      text: `${verdict}. Proposal 1: ${meshLabel(p)} (${gain}, confidence ${pct(p.confidence)})${more}.`,
      proposals: props.length,
    };
  }
  if (r.nothing_fits?.summary) return { text: `${verdict}. ${r.nothing_fits.summary}.`, proposals: 0 };
  return { text: `${verdict}; no proposal.`, proposals: 0 };
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
