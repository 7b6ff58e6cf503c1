/** The ASAP language client: discover the interpreter, check it, start `<python> -m server`, restart on demand.
 *
 * Workspace trust: in VS Code's Restricted Mode (a folder the user has not trusted, e.g. a freshly cloned MaxText
 * repository) the server still reads and prices the configs (diagnostics, hovers, quick fixes, estimates), but
 * nothing the workspace chooses runs: the interpreter is the user's or the installed one (never the workspace's
 * `.venv`, never a workspace-level asap.python), the settings the workspace could point at code are read at user level
 * only, and the server is told `trusted: false` (no Verify, no Claude). Trusting the workspace restarts the server
 * with the full settings. */
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
  TransportKind,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';

import { serverEnvWithStore } from './apiKey';
import { type Interpreter, interpreterCandidates } from './interpreter';
import { carriedWheel, findPythons, pickPython, runInstall, serverVenvDir, upgradeAvailable } from './install';
import type { ServerState } from './statusBar';
import { clientChannel, type LevelSink, type Logger } from './log';
import { ProgressNotifications } from './progress';
import { pythonExtensionInterpreter } from './pythonExtension';
import { cappedErrorHandler, RestartBudget } from './restartBudget';
import { checkServerImport, compatible, incompatibleReason, notInstalledMessage } from './serverCheck';
import { NOT_POSTGRES, PASSWORD_IN_URL, redactStore, SET_STORE_PASSWORD, setStorePassword } from './store';

const OPEN_SETTINGS = 'Open Settings';
export const INSTALL_SERVER = 'Install Server';
const UPGRADE_SERVER = 'Upgrade Server';

/** The asap.* settings that name a program or code to run: package.json's
 * capabilities.untrustedWorkspaces.restrictedConfigurations (a test keeps the two in step). In Restricted Mode only
 * their user-level value (or the default) counts. */
export const RESTRICTED_SETTINGS = ['python', 'maxtextPython', 'maxtextPath'] as const;

/** vscode.workspace.isTrusted (a host without workspace trust counts as trusted). */
export function workspaceTrusted(): boolean {
  return vscode.workspace.isTrusted !== false;
}

/** An `asap` setting as the server is started with it: in Restricted Mode a restricted one's user value only. */
export function settingFor<T>(key: string, fallback: T, trusted: boolean): T {
  const cfg = vscode.workspace.getConfiguration('asap');
  if (trusted || !(RESTRICTED_SETTINGS as readonly string[]).includes(key)) return cfg.get<T>(key, fallback);
  const seen = cfg.inspect<T>(key);
  return seen?.globalValue ?? seen?.defaultValue ?? fallback;
}
const SHOW_OUTPUT = 'Show Output';

/** What the language server was last started with; mcp.ts offers the MCP server on the same interpreter. */
export interface ServerLaunch {
  python: string;
  /** the ASAP version the interpreter has (serverCheck) */
  version: string;
  /** the first workspace folder; in Restricted Mode the extension's own directory */
  cwd: string | undefined;
  trusted: boolean;
}

export class AsapClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private notifications: ProgressNotifications | undefined;
  private pending: Promise<void> = Promise.resolve();
  private readonly budget = new RestartBudget();
  private readonly log: Logger;
  private readonly disposables: vscode.Disposable[] = [];
  /** the shared store's passwords (asap.store's URL, SecretStorage, PGPASSWORD): masked in every log line */
  private secrets: string[] = [];
  private readonly warned = new Set<string>(); // the store warnings shown this session (each once)
  /** the last start's interpreter (undefined: none usable), told to onDidChangeLaunch's listeners (mcp.ts) */
  launch: ServerLaunch | undefined;
  private readonly launchListeners = new Set<(launch: ServerLaunch | undefined) => void>();

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly channel: vscode.LogOutputChannel,
    log: Logger,
    private readonly onState: (state: ServerState) => void = () => undefined,
  ) {
    const hide = (m: string): string => redactStore(m, this.secrets);
    this.log = { info: (m) => log.info(hide(m)), warn: (m) => log.warn(hide(m)), error: (m) => log.error(hide(m)) };
    this.disposables.push(
      // the store is the server process's environment (ASAP_STORE): a change needs a new process
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('asap.store')) {
          this.log.info('asap.store changed; restarting the server');
          void this.restart();
        }
      }),
      vscode.commands.registerCommand(SET_STORE_PASSWORD, () =>
        setStorePassword(this.context.secrets, () => this.restart(), this.log),
      ),
      // trust granted (it cannot be taken back without a reload): the workspace's interpreter, Verify and Claude
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        this.log.info('The workspace is trusted now; restarting the server with its settings');
        void this.restart();
      }),
    );
  }

  /** Start, stop and restart run one at a time, in the order asked. */
  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      this.budget.reset();
      await this.doStart();
    });
  }

  /** Called after each start's interpreter discovery, with what it found (undefined: nothing usable). */
  onDidChangeLaunch(listener: (launch: ServerLaunch | undefined) => void): vscode.Disposable {
    this.launchListeners.add(listener);
    return { dispose: () => void this.launchListeners.delete(listener) };
  }

  /** workspace/executeCommand on the running server (its errors come back as a rejected promise). */
  async executeServerCommand(command: string, args: unknown[]): Promise<unknown> {
    const client = this.client;
    if (!client || !client.isRunning()) throw new Error('the ASAP server is not running');
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
    void this.stop();
  }

  private enqueue(op: () => Promise<void>): Promise<void> {
    this.pending = this.pending.then(op, op);
    return this.pending;
  }

  private async doStart(): Promise<void> {
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const trusted = workspaceTrusted();
    if (!trusted) {
      this.log.info(
        'Restricted Mode: the workspace is not trusted. ASAP reads its configs; the workspace interpreter, Verify and Claude are off until it is trusted',
      );
    }
    // `python -c`/`-m` put the working directory first on sys.path: in an untrusted workspace a `server/` package
    // of its own would run in place of ASAP's. There, the server runs in the extension's directory.
    const cwd = trusted ? folders[0] : this.context.extensionPath;
    const found = await this.usableInterpreter(folders, trusted, cwd);
    this.launch = found && { python: found.interpreter.path, version: found.version, cwd, trusted };
    for (const listener of this.launchListeners) listener(this.launch);
    if (!found) return;
    const interpreter = found.interpreter;

    const store = await serverEnvWithStore(
      this.context.secrets,
      process.env,
      vscode.workspace.getConfiguration('asap').get<string>('store', ''),
    );
    this.secrets = store.secrets;
    this.warnAboutStore(store.passwordInUrl, store.notPostgres, store.url);
    const serverOptions: ServerOptions = {
      command: interpreter.path,
      args: ['-m', 'server'],
      transport: TransportKind.stdio,
      // The Anthropic key and the store's password (SecretStorage) reach the server in its environment only:
      // never a setting or a log.
      options: { cwd, env: store.env },
    };
    // The server's long jobs as cancellable notifications (progress.ts), not the client's status-bar text.
    let client: LanguageClient | undefined;
    const notifications = new ProgressNotifications((token) => {
      client?.sendNotification(WorkDoneProgressCancelNotification.type, { token }).catch((err: unknown) => {
        this.log.warn(`Cancelling ${String(token)}: ${String(err)}`);
      });
    });
    this.notifications = notifications;
    const clientOptions: LanguageClientOptions = {
      // YAML configs and Kubernetes manifests; launch files: shell scripts, Makefiles and READMEs' code blocks (the
      // server reads the MaxText runs in them and stays silent on a file that has none)
      documentSelector: [
        { scheme: 'file', language: 'yaml' },
        { scheme: 'untitled', language: 'yaml' },
        { scheme: 'file', language: 'shellscript' },
        { scheme: 'untitled', language: 'shellscript' },
        { scheme: 'file', language: 'makefile' },
        { scheme: 'file', language: 'markdown' },
      ],
      synchronize: { configurationSection: 'asap' },
      initializationOptions: { settings: currentSettings(trusted) },
      outputChannel: this.clientOutput(),
      errorHandler: cappedErrorHandler(this.budget, this.log, (m) => this.offerOutput(m)),
      middleware: {
        handleWorkDoneProgress: notifications.middleware,
        // the server's workspace/configuration pull gets what initializationOptions said (Restricted Mode included)
        workspace: {
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (trusted || !Array.isArray(answer)) return answer;
            return params.items.map((item, i) => (item.section === 'asap' ? currentSettings(false) : answer[i]));
          },
        },
      },
    };
    this.log.info(`Starting the ASAP server: ${interpreter.path} -m server (cwd ${cwd ?? 'unset'})`);
    if (store.url) this.log.info(`Shared store: ${redactStore(store.url)}`);
    client = new LanguageClient('asap', 'ASAP', serverOptions, clientOptions);
    this.client = client;
    // A server that stopped (crash, restart) ends its jobs: close their notifications.
    client.onDidChangeState((e) => {
      if (e.newState === State.Stopped) notifications.dispose();
    });
    this.onState('starting');
    try {
      await client.start();
      this.log.info('The ASAP server is running');
      this.onState('running');
    } catch (err) {
      this.onState('failed');
      this.log.error(`The ASAP server failed to start: ${String(err)}`);
      this.offerOutput('The ASAP server failed to start. See the ASAP output for details.');
    }
  }

  /** *ASAP: Install Server* (or its upgrade): stop the server, install the carried wheel into the server venv, start
   * again (the new venv is found where discovery looks for it). A failure leaves the previous server to start. */
  installServer(upgrade = false): Promise<void> {
    return this.enqueue(async () => {
      const wheel = carriedWheel(this.context.extensionPath);
      if (!wheel) {
        this.log.error(`Install Server: this extension carries no server wheel (${this.context.extensionPath}/server)`);
        this.offerOutput(
          'ASAP: this build of the extension carries no server wheel. Install it with pip (`pip install asap`) and set asap.python.',
        );
        return;
      }
      const venvDir = this.venvDir();
      let python = '';
      if (!upgrade) {
        const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
        const trusted = workspaceTrusted();
        const pythons = await findPythons({
          pythonExtension: await pythonExtensionInterpreter(vscode.workspace.workspaceFolders?.[0]?.uri).catch(() => undefined),
          envPath: process.env.PATH,
          workspaceFolders: folders,
          trusted,
          log: this.log,
        });
        this.log.info(`Install Server: Pythons found: ${pythons.map((p) => `${p.path} (${p.version})`).join(', ') || 'none'}`);
        const picked = await pickPython(pythons, this.log);
        if (!picked) {
          this.log.info('Install Server: no Python picked; nothing installed');
          return;
        }
        python = picked;
      }
      await this.doStop();
      const installed = await runInstall({ python, venvDir, wheel, upgrade }, this.log, () => this.channel.show());
      if (installed) {
        this.budget.reset();
        const setting = settingFor('python', '', workspaceTrusted()).trim();
        if (setting) {
          // discovery takes the setting first: the new venv would not be used
          void vscode.window
            .showWarningMessage(
              `ASAP: asap.python (${setting}) is set and is used before the installed server. Clear it to use the server venv.`,
              OPEN_SETTINGS,
            )
            .then((choice) => {
              if (choice === OPEN_SETTINGS) void vscode.commands.executeCommand('workbench.action.openSettings', 'asap.python');
            });
        }
      }
      await this.doStart();
    });
  }

  private venvDir(): string {
    return serverVenvDir(this.context.globalStorageUri?.fsPath ?? path.join(this.context.extensionPath, '.storage'));
  }

  private extensionVersion(): string {
    return (this.context.extension?.packageJSON as { version?: string } | undefined)?.version ?? 'unknown';
  }

  /** The first interpreter (discovery's order) that imports a compatible server. An automatic find without ASAP (a
   * workspace's own .venv, the Python extension's) is passed over; the asap.python setting is the user's choice and
   * is not. None: the user is told why and offered *Install Server*. */
  private async usableInterpreter(
    folders: string[],
    trusted: boolean,
    cwd: string | undefined,
  ): Promise<{ interpreter: Interpreter; version: string } | undefined> {
    const ext = this.extensionVersion();
    let refused: { interpreter: Interpreter; reason: string } | undefined;
    for await (const interpreter of interpreterCandidates({
      setting: settingFor('python', '', trusted),
      trusted,
      workspaceFolders: folders,
      extensionPath: this.context.extensionPath,
      installedVenv: this.venvDir(),
      platform: process.platform,
      exists: (p) => fs.existsSync(p),
      pythonExtensionInterpreter: () => pythonExtensionInterpreter(vscode.workspace.workspaceFolders?.[0]?.uri),
      log: this.log,
    })) {
      const check = await checkServerImport(interpreter.path, cwd);
      const reason = !check.ok
        ? check.reason
        : compatible(check.version, ext)
          ? undefined
          : incompatibleReason(check.version, ext);
      if (check.ok && !reason) {
        this.log.info(`${interpreter.path} can import server and pygls (ASAP ${check.version})`);
        this.offerUpgrade(interpreter, check.version);
        return { interpreter, version: check.version };
      }
      this.log[interpreter.source === 'setting' ? 'error' : 'warn'](
        `Cannot start the server with ${interpreter.path} (${interpreter.source}): ${reason}`,
      );
      if (interpreter.source === 'setting') {
        refused = { interpreter, reason: reason ?? '' };
        break;
      }
      refused ??= { interpreter, reason: reason ?? '' };
    }
    this.onState('not installed');
    if (refused?.interpreter.source === 'setting') {
      const { interpreter, reason } = refused;
      this.offerInstall(
        reason.endsWith('does not exist')
          ? `ASAP: the Python interpreter ${interpreter.path} (from ${interpreter.source}) does not exist. Set asap.python.`
          : reason.startsWith('it has ASAP')
            ? `ASAP: ${interpreter.path} cannot run this extension's server: ${reason}. Upgrade it, or install the server.`
            : notInstalledMessage(interpreter.path, this.checkoutHint()),
      );
    } else {
      this.offerInstall(
        `ASAP needs its Python server, which is not installed${refused ? ` (${refused.interpreter.path}: ${refused.reason})` : ''}. Install it in a venv of its own (from your package index), or set asap.python.`,
      );
    }
    return undefined;
  }

  /** The server venv is older than the wheel this extension carries: offer the upgrade (once a session). */
  private offerUpgrade(interpreter: Interpreter, version: string): void {
    const wheel = carriedWheel(this.context.extensionPath);
    if (interpreter.source !== 'installed server' || !upgradeAvailable(version, wheel) || !wheel) return;
    const key = `upgrade:${wheel.version}`;
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.log.info(`The server venv has ASAP ${version}; this extension carries ${wheel.version}`);
    void vscode.window
      .showInformationMessage(`ASAP: this extension carries server ${wheel.version}; the installed one is ${version}.`, UPGRADE_SERVER)
      .then((choice) => {
        if (choice === UPGRADE_SERVER) void this.installServer(true);
      });
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.notifications?.dispose();
    this.notifications = undefined;
    if (!client) return;
    this.onState('stopped');
    try {
      if (client.needsStop()) await client.stop(5000);
    } catch (err) {
      this.log.warn(`Stopping the ASAP server: ${String(err)}`);
    }
  }

  /** The output channel handed to the language client: its lines and the server's stderr written to the ASAP
   * channel in the channel's own format, one entry per line, no blank lines (log.ts clientChannel). */
  private clientOutput(): vscode.OutputChannel {
    const channel = this.channel;
    // the server's stderr and the protocol trace (initializationOptions hold asap.store) lose the store's password
    const hide = (m: string): string => redactStore(m, this.secrets);
    const sink: LevelSink = {
      debug: (m) => channel.debug(hide(m)),
      info: (m) => channel.info(hide(m)),
      warn: (m) => channel.warn(hide(m)),
      error: (m) => channel.error(hide(m)),
    };
    return {
      name: channel.name,
      ...clientChannel(sink),
      show: () => channel.show(true),
      hide: () => channel.hide(),
      dispose: () => undefined,
    };
  }

  /** Where `pip install -e` should point: the checkout the extension runs from, when it is one. */
  private checkoutHint(): string {
    const repo = path.dirname(this.context.extensionPath);
    return fs.existsSync(path.join(repo, 'pyproject.toml')) ? repo : '<ASAP checkout>';
  }

  /** A password written in asap.store's URL, or a value that is not a postgresql:// URL: said once a session. */
  private warnAboutStore(passwordInUrl: boolean, notPostgres: boolean, url: string | undefined): void {
    const key = `${passwordInUrl ? 'password' : notPostgres ? 'scheme' : ''}:${url ? redactStore(url) : ''}`;
    if ((!passwordInUrl && !notPostgres) || this.warned.has(key)) return;
    this.warned.add(key);
    const message = passwordInUrl ? PASSWORD_IN_URL : NOT_POSTGRES;
    this.log.warn(message);
    const actions = passwordInUrl ? ['Set Shared Store Password', OPEN_SETTINGS] : [OPEN_SETTINGS];
    void vscode.window.showWarningMessage(message, ...actions).then((choice) => {
      if (choice === 'Set Shared Store Password') void vscode.commands.executeCommand(SET_STORE_PASSWORD);
      if (choice === OPEN_SETTINGS) void vscode.commands.executeCommand('workbench.action.openSettings', 'asap.store');
    });
  }

  /** No server to start: the message, with *Install Server* when the extension carries a wheel. */
  private offerInstall(message: string): void {
    const actions = carriedWheel(this.context.extensionPath) ? [INSTALL_SERVER, OPEN_SETTINGS, SHOW_OUTPUT] : [OPEN_SETTINGS, SHOW_OUTPUT];
    void vscode.window.showErrorMessage(message, ...actions).then((choice) => {
      if (choice === INSTALL_SERVER) void vscode.commands.executeCommand('asap.installServer');
      if (choice === OPEN_SETTINGS) void vscode.commands.executeCommand('workbench.action.openSettings', 'asap.python');
      if (choice === SHOW_OUTPUT) this.channel.show();
    });
  }

  private offerOutput(message: string): void {
    void vscode.window.showErrorMessage(message, SHOW_OUTPUT).then((choice) => {
      if (choice === SHOW_OUTPUT) this.channel.show();
    });
  }
}

/** The `asap` section as plain JSON, for initializationOptions. In Restricted Mode: the restricted settings at user
 * level, Claude off and `trusted: false` (the server then refuses Verify: server/editor/settings.py). */
export function currentSettings(trusted: boolean): Record<string, unknown> {
  const all = JSON.parse(JSON.stringify(vscode.workspace.getConfiguration('asap'))) as Record<string, unknown>;
  if (trusted) return all;
  for (const key of RESTRICTED_SETTINGS) {
    const value = settingFor<unknown>(key, undefined, false);
    if (value === undefined) delete all[key];
    else all[key] = value;
  }
  return { ...all, llm: 'off', trusted: false };
}
