/** Entry point: wire the output channel, commands and settings to the ASAP language client. */
import * as vscode from 'vscode';

import { analyzeActive, verifyActive } from './analyze';
import { setApiKey } from './apiKey';
import { AsapClient, workspaceTrusted } from './client';
import { CLIENT_COMMANDS } from './contract';
import { linkProfile, unlinkProfile } from './linkProfile';
import { registerMcpServer } from './mcp';
import { recordOutcome } from './outcome';
import { redactingLogger } from './log';
import { showProposals } from './proposals';
import { RooflineViews } from './roofline';
import { AsapStatus, showStatusMenu } from './statusBar';

let asap: AsapClient | undefined;

function runServerCommand(command: string, args: unknown[]): Promise<unknown> {
  if (!asap) return Promise.reject(new Error('the ASAP server is not running'));
  return asap.executeServerCommand(command, args);
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const channel = vscode.window.createOutputChannel('ASAP', { log: true });
  const log = redactingLogger(channel);
  const status = new AsapStatus();
  // Restricted Mode: said once, in its own item (what is off until the workspace is trusted)
  status.setRestricted(!workspaceTrusted());
  asap = new AsapClient(context, channel, log, (state) => status.setState(state));
  const roofline = new RooflineViews(context.extensionUri, runServerCommand, log);
  // ASAP's MCP server for the editor's agents, on the interpreter the language client finds (VS Code 1.101+)
  const mcp = registerMcpServer(asap, context.secrets, log);

  context.subscriptions.push(
    channel,
    status,
    asap,
    roofline,
    mcp,
    vscode.commands.registerCommand('asap.restartServer', () => asap?.restart()),
    vscode.commands.registerCommand('asap.installServer', () => asap?.installServer()),
    vscode.commands.registerCommand('asap.showOutput', () => channel.show()),
    vscode.commands.registerCommand('asap.analyze', () => analyzeActive(runServerCommand, log)),
    vscode.commands.registerCommand('asap.verify', () => verifyActive(runServerCommand, log)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showRoofline, (uri?: unknown) => roofline.show(uri)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showProposals, (uri?: unknown, line?: unknown, ch?: unknown) =>
      showProposals(uri, line, ch),
    ),
    vscode.commands.registerCommand('asap.statusMenu', () => showStatusMenu(status.current, status.restricted)),
    vscode.commands.registerCommand('asap.linkProfile', () => linkProfile(runServerCommand, log)),
    vscode.commands.registerCommand('asap.unlinkProfile', () => unlinkProfile(runServerCommand, log)),
    vscode.commands.registerCommand('asap.recordOutcome', () => recordOutcome(runServerCommand, log)),
    vscode.commands.registerCommand('asap.setApiKey', () =>
      setApiKey(context.secrets, () => asap?.restart() ?? Promise.resolve(), log),
    ),
    vscode.workspace.onDidGrantWorkspaceTrust(() => status.setRestricted(false)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      // Other asap.* settings reach the running server through workspace/didChangeConfiguration.
      if (e.affectsConfiguration('asap.python')) {
        log.info('asap.python changed; restarting the server');
        void asap?.restart();
      }
    }),
  );
  await asap.start();
}

export async function deactivate(): Promise<void> {
  await asap?.stop();
}
