/** The status bar item: the server's state, and the agents' last verdict for the config in the editor. */
import * as vscode from 'vscode';

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
    this.item.command = 'asap.showOutput';
    this.subscriptions.push(
      vscode.languages.onDidChangeDiagnostics(() => this.render()),
      vscode.window.onDidChangeActiveTextEditor(() => this.render()),
    );
    this.render();
    this.item.show();
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
    this.item.tooltip = `ASAP server ${this.state}${verdict ? `; agents' verdict for this config: ${verdict}` : ''}. Click for the ASAP output.`;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.item.dispose();
  }
}
