/** The status bar item: the server's state, and ASAP's verdict for the config in the editor: the summary line of its
 * code lens ("ASAP: compute-bound · MFU 25% · 3 proposals (best ×1.48, confidence 69%)"), shortened, with the TPU
 * compiler's verdict in the tooltip; the agents' diagnostic (ASAP300) when there is no lens. Every number labelled. */
import * as vscode from 'vscode';

import { CLIENT_COMMANDS } from './contract';

/** 'not installed': no interpreter imports a compatible server (client.ts offers *ASAP: Install Server*). */
export type ServerState = 'starting' | 'running' | 'stopped' | 'failed' | 'not installed';

/** What the Restricted Mode item says (once, while the workspace is untrusted: client.ts). */
export const RESTRICTED_TEXT = '$(shield) ASAP: restricted';
export const RESTRICTED_TOOLTIP = [
  'ASAP runs in Restricted Mode: this workspace is not trusted.',
  "Off until you trust it: the workspace interpreter (its .venv, a workspace asap.python), Verify (the TPU compiler's compiles), Claude.",
  'Diagnostics, hovers, quick fixes and estimates work, with your own or the installed Python.',
  'Click to manage workspace trust.',
].join('\n');
/** VS Code's "Workspaces: Manage Workspace Trust". */
export const MANAGE_TRUST = 'workbench.trust.manage';

/** The ASAP300 diagnostic's message starts "<bottleneck>-bound (<source>, confidence N%)", maybe "[stale ...] " first. */
const VERDICT = /^(\[stale[^\]]*\]\s*)?(\w+)-bound \((\w+), confidence (\d+)%\)/;

export function verdictText(diagnostics: readonly vscode.Diagnostic[]): string | undefined {
  for (const d of diagnostics) {
    if (String(typeof d.code === 'object' ? d.code.value : d.code) !== 'ASAP300') continue;
    const m = VERDICT.exec(d.message);
    if (m) return `${m[2]}-bound (confidence ${m[4]}%)${m[1] ? ' (stale)' : ''}`;
  }
  return undefined;
}

export interface LensStatus {
  text: string; // after "ASAP: "
  tooltip: string;
}

/** What the status bar says from the code lens titles of the config: the verdict and the advice without their figures
 * ("compute-bound · 3 proposals", "compute-bound · 1 proposal fits · 2 withdrawn: do not fit"), the lines in the
 * tooltip. Undefined when the server shows no summary lens (not a config, or still analysing). */
export function lensStatus(titles: readonly string[]): LensStatus | undefined {
  const summary = titles.find((t) => t.startsWith('ASAP: ') && !t.startsWith('ASAP: analysing'));
  if (!summary) return undefined;
  const segments = summary.slice('ASAP: '.length).split(' · ');
  const kept = segments
    .filter((s) => !/^MFU /.test(s))
    .map((s) => s.replace(/ \((best|what would)[^)]*\)/, '').replace(/ \(TPU compiler; best[^)]*\)/, ' (TPU compiler)'));
  const info = titles.filter((t) => t === summary || t.startsWith('TPU compiler: '));
  return { text: kept.join(' · '), tooltip: info.join('\n') };
}

type LensProvider = (uri: vscode.Uri) => Thenable<vscode.CodeLens[] | undefined>;

const codeLenses: LensProvider = (uri) =>
  vscode.commands.executeCommand<vscode.CodeLens[] | undefined>('vscode.executeCodeLensProvider', uri);

export class AsapStatus implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private restrictedItem: vscode.StatusBarItem | undefined;
  private state: ServerState = 'starting';
  private readonly subscriptions: vscode.Disposable[] = [];
  private running: Promise<void> | undefined;
  private again = false;

  constructor(private readonly lenses: LensProvider = codeLenses) {
    this.item = vscode.window.createStatusBarItem('asap.status', vscode.StatusBarAlignment.Left, 10);
    this.item.name = 'ASAP';
    this.item.command = 'asap.statusMenu';
    this.subscriptions.push(
      // the server publishes again whenever its verdicts change (the lens with them): redraw for the config shown
      vscode.languages.onDidChangeDiagnostics((e?: vscode.DiagnosticChangeEvent) => {
        const shown = vscode.window.activeTextEditor?.document.uri.toString();
        if (!e || !shown || e.uris.some((u) => u.toString() === shown)) void this.render();
      }),
      vscode.window.onDidChangeActiveTextEditor(() => void this.render()),
    );
    this.show(undefined, undefined);
    this.item.show();
  }

  get current(): ServerState {
    return this.state;
  }

  /** Show (untrusted workspace) or remove (trusted) the Restricted Mode item, next to the server's. */
  setRestricted(restricted: boolean): void {
    if (restricted && !this.restrictedItem) {
      const item = vscode.window.createStatusBarItem('asap.restricted', vscode.StatusBarAlignment.Left, 9);
      item.name = 'ASAP Restricted Mode';
      item.text = RESTRICTED_TEXT;
      item.tooltip = RESTRICTED_TOOLTIP;
      item.command = MANAGE_TRUST;
      item.show();
      this.restrictedItem = item;
    } else if (!restricted && this.restrictedItem) {
      this.restrictedItem.dispose();
      this.restrictedItem = undefined;
    }
  }

  get restricted(): boolean {
    return this.restrictedItem !== undefined;
  }

  setState(state: ServerState): void {
    this.state = state;
    void this.render();
  }

  /** Redraw from the config's code lens (asked once at a time: a change meanwhile asks again after). */
  render(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.draw();
      } while (this.again);
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async draw(): Promise<void> {
    const doc = vscode.window.activeTextEditor?.document;
    const verdict = doc ? verdictText(vscode.languages.getDiagnostics(doc.uri)) : undefined;
    let lens: LensStatus | undefined;
    if (doc && this.state === 'running' && doc.languageId === 'yaml') {
      try {
        const found = (await this.lenses(doc.uri)) ?? [];
        lens = lensStatus(found.map((l) => l.command?.title ?? ''));
      } catch {
        lens = undefined; // no lens provider answer: the diagnostic's verdict, if any
      }
    }
    this.show(lens, verdict);
  }

  private show(lens: LensStatus | undefined, verdict: string | undefined): void {
    const icon = {
      starting: '$(sync~spin)',
      running: '$(pulse)',
      stopped: '$(circle-slash)',
      failed: '$(error)',
      'not installed': '$(cloud-download)',
    }[this.state];
    const what = lens?.text ?? verdict;
    this.item.text = `${icon} ASAP${what ? `: ${what}` : ''}`;
    const detail = lens ? `\n${lens.tooltip}` : verdict ? `; agents' verdict for this config: ${verdict}` : '';
    this.item.tooltip =
      this.state === 'not installed'
        ? 'No Python with the ASAP server was found.\nClick to install it (ASAP: Install Server) or for the logs.'
        : `ASAP server ${this.state}${detail}\nClick for ASAP's actions.`;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.item.dispose();
    this.restrictedItem?.dispose();
  }
}

export interface MenuItem extends vscode.QuickPickItem {
  command: string;
}

/** What the status bar item offers: the actions on the config in the editor while the server runs, then the
 * server's own (logs, restart, key). A stopped or failed server offers the restart and the logs first. In an untrusted
 * workspace (`restricted`) Verify is not offered: the server refuses it until the workspace is trusted. */
export function menuItems(state: ServerState, hasConfig: boolean, restricted = false): MenuItem[] {
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
  if (state === 'not installed') {
    const install = { label: '$(cloud-download) Install Server', description: 'a venv of its own, from the wheel this extension carries', command: 'asap.installServer' };
    return [install, server[0], server[1]];
  }
  if (state === 'failed' || state === 'stopped') return [server[1], server[0], server[2]];
  const offered = restricted ? onConfig.filter((m) => m.command !== 'asap.verify') : onConfig;
  return [...(hasConfig ? offered : []), ...server];
}

export async function showStatusMenu(state: ServerState, restricted = false): Promise<string | undefined> {
  const doc = vscode.window.activeTextEditor?.document;
  const picked = await vscode.window.showQuickPick(menuItems(state, doc?.languageId === 'yaml', restricted), {
    title: `ASAP (server ${state})`,
  });
  if (picked) await vscode.commands.executeCommand(picked.command);
  return picked?.command;
}
