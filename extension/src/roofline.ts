/**
 * "ASAP: Show Roofline": one webview panel with the roofline chart the server computes (asap.server.roofline:
 * the declared slice's roofline, the estimate's components, one point per mesh with an arrow from now to each
 * proposal, the profile's top ops). The panel follows the active config editor: switching to another config the
 * server can chart redraws it for that one (other YAML files leave it as it is). The chart follows the colour
 * theme, and is redrawn when its config's diagnostics change (an edit, a save, a finished analysis), so it always
 * shows the text as it is now.
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
  #chart, #chart .vega-embed { display: block; max-width: 100%; }
  /* laid out by the server at one size, scaled as a whole to the panel's width (labels keep their places) */
  #chart svg.marks { width: 100%; max-width: 1100px; height: auto; }
  #tip { position: fixed; z-index: 10; pointer-events: none; max-width: min(30em, calc(100vw - 16px)); box-sizing: border-box;
    padding: 4px 8px; font-size: var(--vscode-font-size); line-height: 1.35; overflow-wrap: anywhere;
    background: var(--vscode-editorHoverWidget-background); color: var(--vscode-editorHoverWidget-foreground);
    border: 1px solid var(--vscode-editorHoverWidget-border); border-radius: 3px; box-shadow: 0 2px 8px var(--vscode-widget-shadow); }
  #tip .row { margin: 1px 0; }
  #tip .key { color: var(--vscode-descriptionForeground); margin-right: 0.5em; }
  #tip .key::after { content: ":"; }
</style>
</head>
<body>
<div id="status">Computing the roofline...</div>
<div id="chart"></div>
<div id="tip" role="tooltip" hidden></div>
<script nonce="${nonce}" src="${scriptUri}"></script>
</body>
</html>`;
}

/** The languages ASAP reads: YAML configs and manifests, and the launch files holding MaxText runs. */
const ANALYSED = ['yaml', 'shellscript', 'makefile', 'markdown'];

function targetUri(arg: unknown): string | undefined {
  if (typeof arg === 'string') return arg; // a launch file's run is `<uri>#run=N`
  if (arg instanceof vscode.Uri) return arg.toString();
  const doc = vscode.window.activeTextEditor?.document;
  return doc && ANALYSED.includes(doc.languageId) ? doc.uri.toString() : undefined;
}

/** A config editor the panel may follow: a YAML file (or an unsaved one), not an output or diff pane. */
function followable(editor: vscode.TextEditor | undefined): string | undefined {
  const doc = editor?.document;
  if (!doc || !ANALYSED.includes(doc.languageId) || !['file', 'untitled'].includes(doc.uri.scheme)) return undefined;
  return doc.uri.toString();
}

const FRESH_NOTE =
  "Now and the agents' proposals (arrows from now), priced by ASAP's estimate; hover a point for its mesh and numbers.";
const STALE_NOTE =
  'Current mesh only: proposals appear once the agents have analysed this text (save, or ASAP: Analyze).';

class RooflinePanel {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private ready = false;
  private seq = 0; // the latest request: an older reply (another config, an older text) is dropped
  private pending: string | undefined; // a config being followed to, until the server answers for it

  constructor(
    public uri: string,
    readonly panel: vscode.WebviewPanel,
    private readonly run: RunServerCommand,
    private readonly log: Logger,
  ) {
    panel.webview.onDidReceiveMessage((m: FromWebview) => this.receive(m));
  }

  /** The config shown, or the one the panel is switching to. */
  get target(): string {
    return this.pending ?? this.uri;
  }

  private get path(): string {
    return vscode.Uri.parse(this.uri).fsPath;
  }

  private receive(m: FromWebview): void {
    if (m.type === 'ready') {
      this.ready = true;
      void this.draw();
    } else if (m.type === 'rendered') {
      const hidden = m.hiddenLabels ? ` (${m.hiddenLabels} labels hidden to avoid overlaps)` : '';
      this.log.info(`roofline drawn for ${this.path}: ${m.marks} points${hidden}`);
    } else {
      this.log.error(`roofline for ${this.path} could not be drawn: ${m.message}`);
    }
  }

  /** Redraw soon (coalesces bursts of diagnostics while typing). */
  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.draw(), REDRAW_DELAY_MS);
  }

  private async request(uri: string): Promise<{ res?: RooflineReply; error?: string; theme: ChartTheme }> {
    const theme = chartTheme(vscode.window.activeColorTheme.kind);
    try {
      return { res: (await this.run(SERVER_COMMANDS.roofline, [uri, theme])) as RooflineReply, theme };
    } catch (e) {
      return { error: e instanceof Error ? e.message : String(e), theme };
    }
  }

  private async post(res: RooflineReply | undefined, error: string | undefined, theme: ChartTheme): Promise<void> {
    let msg: ToWebview;
    if (res) {
      this.panel.title = res.title;
      msg = { type: 'render', spec: res.spec, theme, note: res.fresh ? FRESH_NOTE : STALE_NOTE };
    } else {
      msg = { type: 'error', message: `ASAP: ${error}` };
    }
    await this.panel.webview.postMessage(msg);
  }

  /** Redraw the config shown (or the one being followed to: a redraw must not undo a switch in flight). */
  async draw(): Promise<void> {
    if (this.pending) return this.follow(this.pending);
    if (!this.ready) return; // the page asks for its first chart when its script has loaded
    const seq = ++this.seq;
    const { res, error, theme } = await this.request(this.uri);
    if (seq === this.seq) await this.post(res, error, theme);
  }

  /** Show `uri`'s chart instead, if the server can chart it (another ASAP config); otherwise keep this one. */
  async follow(uri: string): Promise<void> {
    const seq = ++this.seq;
    this.pending = uri;
    const { res, error, theme } = await this.request(uri);
    if (seq !== this.seq) return;
    this.pending = undefined;
    if (!res) {
      this.log.info(`roofline stays on ${this.path}: ${vscode.Uri.parse(uri).fsPath} has no chart (${error})`);
      return;
    }
    this.uri = uri;
    if (this.ready) await this.post(res, undefined, theme);
  }

  /** Show `uri` (the command's choice, no question asked). */
  retarget(uri: string): void {
    this.pending = undefined;
    this.uri = uri;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

/** The roofline panel, created or revealed by the command, kept in step with its config and the active editor. */
export class RooflineViews implements vscode.Disposable {
  private view: RooflinePanel | undefined;
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly run: RunServerCommand,
    private readonly log: Logger,
  ) {
    this.subscriptions = [
      vscode.languages.onDidChangeDiagnostics((e) => {
        const view = this.view;
        if (view && e.uris.some((u) => u.toString() === view.target)) view.schedule();
      }),
      vscode.window.onDidChangeActiveColorTheme(() => void this.view?.draw()),
      vscode.window.onDidChangeActiveTextEditor((editor) => {
        const uri = followable(editor);
        if (this.view && uri && uri !== this.view.target) void this.view.follow(uri);
      }),
    ];
  }

  /** The config the panel shows, if one is open. */
  get shown(): string | undefined {
    return this.view?.uri;
  }

  show(arg?: unknown): boolean {
    const uri = targetUri(arg);
    if (!uri) {
      void vscode.window.showErrorMessage('ASAP: open a MaxText config (YAML) to show its roofline.');
      return false;
    }
    if (this.view) {
      this.view.retarget(uri);
      this.view.panel.reveal(undefined, true);
      void this.view.draw();
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
      if (this.view === view) this.view = undefined;
    });
    this.view = view;
    return true;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.view?.dispose();
    this.view?.panel.dispose();
    this.view = undefined;
  }
}
