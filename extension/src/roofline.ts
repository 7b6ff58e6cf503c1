/**
 * "ASAP: Show Roofline": a webview panel per config with the roofline chart the server computes
 * (asap.server.roofline: the declared slice's roofline, the estimate's components, one point per mesh, the
 * profile's top ops). The chart follows the colour theme, and is redrawn when the config's diagnostics change
 * (an edit, a save, a finished analysis), so it always shows the text as it is now.
 */
import { randomBytes } from 'node:crypto';

import * as vscode from 'vscode';

import { type RooflineReply, SERVER_COMMANDS } from './contract';
import type { RunServerCommand } from './linkProfile';
import type { Logger } from './log';
import type { FromWebview, ToWebview } from './rooflineMessages';

export const VIEW_TYPE = 'asap.roofline';
const REDRAW_DELAY_MS = 300;

export type ChartTheme = 'light' | 'dark';

/** Vega colours for a VS Code theme kind: dark and high-contrast themes get the dark palette. */
export function chartTheme(kind: vscode.ColorThemeKind): ChartTheme {
  return kind === vscode.ColorThemeKind.Dark || kind === vscode.ColorThemeKind.HighContrast ? 'dark' : 'light';
}

/** The page: a strict content security policy (scripts by nonce only, no eval), the chart and a status line. */
export function rooflineHtml(cspSource: string, scriptUri: string, nonce: string): string {
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src ${cspSource} 'unsafe-inline'`,
    `img-src ${cspSource} data: blob:`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>ASAP roofline</title>
<style>
  body { background: var(--vscode-editor-background); color: var(--vscode-foreground); font-family: var(--vscode-font-family); }
  #status { margin: 0.5em 0; opacity: 0.85; }
  #chart { width: calc(100% - 2em); }
</style>
</head>
<body>
<div id="status">Computing the roofline...</div>
<div id="chart"></div>
<script nonce="${nonce}" src="${scriptUri}"></script>
</body>
</html>`;
}

function targetUri(arg: unknown): string | undefined {
  if (typeof arg === 'string') return arg;
  if (arg instanceof vscode.Uri) return arg.toString();
  const doc = vscode.window.activeTextEditor?.document;
  return doc && doc.languageId === 'yaml' ? doc.uri.toString() : undefined;
}

class RooflinePanel {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private ready = false;

  constructor(
    readonly uri: string,
    readonly panel: vscode.WebviewPanel,
    private readonly run: RunServerCommand,
    private readonly log: Logger,
  ) {
    panel.webview.onDidReceiveMessage((m: FromWebview) => this.receive(m));
  }

  private receive(m: FromWebview): void {
    if (m.type === 'ready') {
      this.ready = true;
      void this.draw();
    } else if (m.type === 'rendered') {
      this.log.info(`roofline drawn for ${vscode.Uri.parse(this.uri).fsPath}: ${m.marks} points`);
    } else {
      this.log.error(`roofline for ${vscode.Uri.parse(this.uri).fsPath} could not be drawn: ${m.message}`);
    }
  }

  /** Redraw soon (coalesces bursts of diagnostics while typing). */
  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.draw(), REDRAW_DELAY_MS);
  }

  async draw(): Promise<void> {
    if (!this.ready) return; // the page asks for its first chart when its script has loaded
    const theme = chartTheme(vscode.window.activeColorTheme.kind);
    let msg: ToWebview;
    try {
      const res = (await this.run(SERVER_COMMANDS.roofline, [this.uri, theme])) as RooflineReply;
      this.panel.title = res.title;
      const note = res.fresh
        ? "Current mesh and the agents' proposals, priced by ASAP's estimate; hover a point for its source."
        : 'Current mesh only: proposals appear once the agents have analysed this text (save, or ASAP: Analyze).';
      msg = { type: 'render', spec: res.spec, theme, note };
    } catch (e) {
      msg = { type: 'error', message: `ASAP: ${e instanceof Error ? e.message : String(e)}` };
    }
    await this.panel.webview.postMessage(msg);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

/** One roofline panel per config, created or revealed by the command and kept in step with the config. */
export class RooflineViews implements vscode.Disposable {
  private readonly panels = new Map<string, RooflinePanel>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly run: RunServerCommand,
    private readonly log: Logger,
  ) {
    this.subscriptions = [
      vscode.languages.onDidChangeDiagnostics((e) => {
        for (const uri of e.uris) this.panels.get(uri.toString())?.schedule();
      }),
      vscode.window.onDidChangeActiveColorTheme(() => {
        for (const p of this.panels.values()) void p.draw();
      }),
    ];
  }

  show(arg?: unknown): boolean {
    const uri = targetUri(arg);
    if (!uri) {
      void vscode.window.showErrorMessage('ASAP: open a MaxText config (YAML) to show its roofline.');
      return false;
    }
    const open = this.panels.get(uri);
    if (open) {
      open.panel.reveal(vscode.ViewColumn.Beside);
      void open.draw();
      return true;
    }
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    const panel = vscode.window.createWebviewPanel(
      VIEW_TYPE,
      `ASAP roofline: ${uri.split('/').pop()}`,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      { enableScripts: true, localResourceRoots: [dist], retainContextWhenHidden: true },
    );
    const script = panel.webview.asWebviewUri(vscode.Uri.joinPath(dist, 'roofline.js'));
    const view = new RooflinePanel(uri, panel, this.run, this.log);
    panel.webview.html = rooflineHtml(panel.webview.cspSource, script.toString(), randomBytes(16).toString('base64'));
    panel.onDidDispose(() => {
      view.dispose();
      this.panels.delete(uri);
    });
    this.panels.set(uri, view);
    return true;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    for (const p of this.panels.values()) {
      p.dispose();
      p.panel.dispose();
    }
    this.panels.clear();
  }
}
