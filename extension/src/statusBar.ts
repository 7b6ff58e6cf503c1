/** The status bar item: the server's state, and the agents' last verdict for the config in the editor. */
import * as vscode from 'vscode';

import { CLIENT_COMMANDS } from './contract';

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';

/** The ASAP300 diagnostic's message starts "<bottleneck>-bound (<source>, confidence N%)", maybe "[stale ...] " first. */
const VERDICT = /^(\[stale[^\]]*\]\s*)?(\w+)-bound \((\w+), confidence (\d+)%\)/;

export function verdictText(diagnostics: readonly vscode.Diagnostic[]): string | undefined {
  for (const d of diagnostics) {
    if (String(typeof d.code === 'object' ? d.code.value : d.code) !== 'ASAP300') continue;
    const m = VERDICT.exec(d.message);
    if (m) return `${m[2]}-bound ${m[4]}%${m[1] ? ' (stale)' : ''}`;
  }
  return undefined;
}

export class AsapStatus implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ServerState = 'starting';
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor() {
    this.item = vscode.window.createStatusBarItem('asap.status', vscode.StatusBarAlignment.Left, 10);
    this.item.name = 'ASAP';
    this.item.command = 'asap.statusMenu';
    this.subscriptions.push(
      vscode.languages.onDidChangeDiagnostics(() => this.render()),
      vscode.window.onDidChangeActiveTextEditor(() => this.render()),
    );
    this.render();
    this.item.show();
  }

  get current(): ServerState {
    return this.state;
  }

  setState(state: ServerState): void {
    this.state = state;
    this.render();
  }

  render(): void {
    const doc = vscode.window.activeTextEditor?.document;
    const verdict = doc ? verdictText(vscode.languages.getDiagnostics(doc.uri)) : undefined;
    const icon = { starting: '$(sync~spin)', running: '$(pulse)', stopped: '$(circle-slash)', failed: '$(error)' }[this.state];
    this.item.text = `${icon} ASAP${verdict ? `: ${verdict}` : ''}`;
    this.item.tooltip = `ASAP server ${this.state}${verdict ? `; agents' verdict for this config: ${verdict}` : ''}. Click for ASAP's actions.`;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.item.dispose();
  }
}

export interface MenuItem extends vscode.QuickPickItem {
  command: string;
}

/** What the status bar item offers: the actions on the config in the editor while the server runs, then the
 * server's own (logs, restart, key). A stopped or failed server offers the restart and the logs first. */
export function menuItems(state: ServerState, hasConfig: boolean): MenuItem[] {
  const onConfig: MenuItem[] = [
    { label: '$(play) Analyze', description: 'diagnosis and proposals for this config', command: 'asap.analyze' },
    { label: '$(check) Verify with TPU Compiler', description: 'compile this mesh and the proposals', command: 'asap.verify' },
    { label: '$(graph-line) Show Roofline', description: 'the chart of this config', command: CLIENT_COMMANDS.showRoofline },
    { label: '$(link) Link Profile...', description: 'an XProf profile of this config', command: 'asap.linkProfile' },
  ];
  const server: MenuItem[] = [
    { label: '$(output) Show Logs', description: 'the ASAP output channel', command: 'asap.showOutput' },
    { label: '$(debug-restart) Restart Server', description: `the server is ${state}`, command: 'asap.restartServer' },
    { label: '$(key) Set API Key...', description: 'for Claude (kept in SecretStorage)', command: 'asap.setApiKey' },
  ];
  if (state === 'failed' || state === 'stopped') return [server[1], server[0], server[2]];
  return [...(hasConfig ? onConfig : []), ...server];
}

export async function showStatusMenu(state: ServerState): Promise<string | undefined> {
  const doc = vscode.window.activeTextEditor?.document;
  const picked = await vscode.window.showQuickPick(menuItems(state, doc?.languageId === 'yaml'), {
    title: `ASAP (server ${state})`,
  });
  if (picked) await vscode.commands.executeCommand(picked.command);
  return picked?.command;
}
