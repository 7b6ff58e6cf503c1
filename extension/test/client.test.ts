import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

const settings: Record<string, unknown> = {};
// the user-level values (inspect's globalValue); `settings` is what get() answers, the workspace's included
const userSettings: Record<string, unknown> = {};
const vscode = vi.hoisted(() => ({
  workspace: {
    workspaceFolders: [] as { uri: { fsPath: string } }[],
    isTrusted: true,
    onDidGrantWorkspaceTrust: vi.fn((f: () => void) => {
      vscode.grantListener = f;
      return { dispose: () => undefined };
    }),
    // the listener AsapClient registers (asap.store changes restart the server)
    onDidChangeConfiguration: vi.fn((f: (e: { affectsConfiguration: (s: string) => boolean }) => void) => {
      vscode.configListener = f;
      return { dispose: () => undefined };
    }),
    getConfiguration: () => {
      const cfg = { ...settings };
      Object.defineProperty(cfg, 'get', { value: (k: string, d: unknown) => settings[k] ?? d, enumerable: false });
      Object.defineProperty(cfg, 'inspect', {
        value: (k: string) => ({ key: `asap.${k}`, globalValue: userSettings[k], workspaceValue: settings[k] }),
        enumerable: false,
      });
      return cfg;
    },
  },
  configListener: undefined as undefined | ((e: { affectsConfiguration: (s: string) => boolean }) => void),
  grantListener: undefined as undefined | (() => void),
  registered: new Map<string, () => unknown>(),
  window: {
    showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
    showWarningMessage: vi.fn((..._args: unknown[]) => Promise.resolve(undefined)),
    showInformationMessage: vi.fn((..._args: unknown[]) => Promise.resolve(undefined)),
    // records the cancel listener of the last notification shown, as `cancel`
    withProgress: vi.fn((_o: unknown, task: (p: unknown, t: unknown) => Promise<void>) =>
      task(
        { report: () => undefined },
        {
          onCancellationRequested: (f: () => void) => {
            vscode.cancel = f;
            return { dispose: () => undefined };
          },
        },
      ),
    ),
  },
  cancel: () => undefined as void,
  ProgressLocation: { Notification: 15 },
  commands: {
    executeCommand: vi.fn(),
    registerCommand: vi.fn((id: string, f: () => unknown) => {
      vscode.registered.set(id, f);
      return { dispose: () => undefined };
    }),
  },
  extensions: { getExtension: vi.fn(() => undefined) },
}));
vi.mock('vscode', () => vscode);

const lc = vi.hoisted(() => {
  const instances: {
    args: unknown[];
    start: ReturnType<typeof vi.fn>;
    stop: ReturnType<typeof vi.fn>;
    sendNotification: ReturnType<typeof vi.fn>;
  }[] = [];
  class LanguageClient {
    start = vi.fn(async () => undefined);
    stop = vi.fn(async () => undefined);
    needsStop = () => true;
    onDidChangeState = vi.fn();
    sendNotification = vi.fn(async () => undefined);
    args: unknown[];
    constructor(...args: unknown[]) {
      this.args = args;
      instances.push(this);
    }
  }
  return { instances, LanguageClient };
});
vi.mock('vscode-languageclient/node', () => ({
  LanguageClient: lc.LanguageClient,
  TransportKind: { stdio: 0 },
  State: { Stopped: 1, Starting: 3, Running: 2 },
  WorkDoneProgressCancelNotification: { type: { method: 'window/workDoneProgress/cancel' } },
  CloseAction: { DoNotRestart: 1, Restart: 2 },
  ErrorAction: { Continue: 1, Shutdown: 2 },
}));

import { AsapClient, RESTRICTED_SETTINGS } from '../src/client';
import { memoryLogger } from './helpers';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'asap-client-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function fakePython(name: string, exitCode: number, stderr = ''): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, `#!/bin/sh\necho "${stderr}" >&2\nexit ${exitCode}\n`, { mode: 0o755 });
  return file;
}

/** An interpreter whose import check passes and says it has ASAP `version`. */
function versionPython(file: string, version: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `#!/bin/sh\necho ${version}\n`, { mode: 0o755 });
  return file;
}

function makeClient(
  stored: Record<string, string> = { 'asap.anthropicApiKey': 'sk-ant-test-SECRET123' },
  over: { extensionPath?: string; globalStorage?: string; version?: string; states?: string[] } = {},
) {
  const log = memoryLogger();
  const secrets = { get: vi.fn(async (k: string) => stored[k]) };
  const context = {
    extensionPath: over.extensionPath ?? path.join(tmp, 'extension'),
    secrets,
    globalStorageUri: { fsPath: over.globalStorage ?? path.join(tmp, 'global-storage') },
    extension: { packageJSON: { version: over.version ?? '0.1.0' } },
  };
  const written: string[] = [];
  const put = (level: string) => (m: string) => void written.push(`${level} ${m}`);
  const channel = { show: vi.fn(), debug: put('debug'), info: put('info'), warn: put('warn'), error: put('error') };
  const onState = (state: string) => void over.states?.push(state);
  return { log, written, client: new AsapClient(context as never, channel as never, log, onState) };
}

beforeEach(() => {
  for (const k of Object.keys(settings)) delete settings[k];
  for (const k of Object.keys(userSettings)) delete userSettings[k];
  vscode.workspace.isTrusted = true;
  vscode.workspace.workspaceFolders = [];
  lc.instances.length = 0;
  vscode.window.showErrorMessage.mockClear();
  vscode.window.showWarningMessage.mockClear();
  vscode.window.showInformationMessage.mockClear();
});

const XLA_FLAGS = '--xla_tpu_enable_data_parallel_all_reduce_opt=true --xla_tpu_scoped_vmem_limit_kib=98304';

describe.skipIf(process.platform === 'win32')('AsapClient', () => {
  it('starts `<python> -m server` for YAML files with the asap settings', async () => {
    const py = fakePython('ok', 0);
    // asap.xlaFlags (a flags string that starts with --) reaches the server as it is, like every asap setting
    Object.assign(settings, { python: py, defaultSlice: 'v5e-256', xlaFlags: XLA_FLAGS });
    const { client, log } = makeClient();
    await client.start();

    expect(lc.instances).toHaveLength(1);
    const [id, , serverOptions, clientOptions] = lc.instances[0].args as [string, string, any, any];
    expect(id).toBe('asap'); // makes asap.trace.server work
    expect(serverOptions).toMatchObject({ command: py, args: ['-m', 'server'] });
    // the stored API key reaches the server's environment, and no log line
    expect(serverOptions.options.env.ANTHROPIC_API_KEY).toBe('sk-ant-test-SECRET123');
    expect(log.lines.join('\n')).not.toContain('SECRET123');
    expect(clientOptions.documentSelector).toEqual([
      { scheme: 'file', language: 'yaml' },
      { scheme: 'untitled', language: 'yaml' },
      { scheme: 'file', language: 'shellscript' },
      { scheme: 'untitled', language: 'shellscript' },
      { scheme: 'file', language: 'makefile' },
      { scheme: 'file', language: 'markdown' },
    ]);
    expect(clientOptions.synchronize).toEqual({ configurationSection: 'asap' });
    expect(clientOptions.initializationOptions).toEqual({
      settings: { python: py, defaultSlice: 'v5e-256', xlaFlags: XLA_FLAGS },
    });
    expect(lc.instances[0].start).toHaveBeenCalledOnce();
    expect(log.lines).toContain(`info Starting the ASAP server: ${py} -m server (cwd unset)`);
    expect(vscode.window.showErrorMessage).not.toHaveBeenCalled();
  });

  it("shows the server's progress as a notification whose cancel reaches that server", async () => {
    Object.assign(settings, { python: fakePython('ok2', 0) });
    const { client } = makeClient();
    await client.start();
    const [, , , clientOptions] = lc.instances[0].args as [string, string, any, any];
    const next = vi.fn();
    vi.useFakeTimers();
    clientOptions.middleware.handleWorkDoneProgress(
      'asap-tpu-1',
      { kind: 'begin', title: 'ASAP: TPU compiler', cancellable: true },
      next,
    );
    vi.advanceTimersByTime(1000); // shown once the job has run for 1 s
    expect(vscode.window.withProgress).toHaveBeenCalledWith(
      { location: 15, title: 'ASAP: TPU compiler', cancellable: true },
      expect.any(Function),
    );
    expect(next).not.toHaveBeenCalled(); // no status-bar part as well
    vscode.cancel();
    expect(lc.instances[0].sendNotification).toHaveBeenCalledWith(
      { method: 'window/workDoneProgress/cancel' },
      { token: 'asap-tpu-1' },
    );
    vi.useRealTimers();
    await client.stop();
  });

  it('shows an actionable error and starts nothing when the package is missing', async () => {
    const py = fakePython('bare', 1, "ModuleNotFoundError: No module named 'server'");
    settings.python = py;
    const { client, log } = makeClient();
    await client.start();

    expect(lc.instances).toHaveLength(0);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
      `ASAP's Python package is not installed in ${py}: run \`${py} -m pip install -e <ASAP checkout>\` or set asap.python.`,
      'Open Settings',
      'Show Output',
    );
    expect(log.lines).toContain(
      `error Cannot start the server with ${py} (setting): ModuleNotFoundError: No module named 'server'`,
    );
  });

  it('restart stops the old server and rediscovers the interpreter', async () => {
    const first = fakePython('first', 0);
    const second = fakePython('second', 0);
    settings.python = first;
    const { client } = makeClient();
    await client.start();
    settings.python = second;
    await client.restart();

    expect(lc.instances.map((c) => (c.args[2] as { command: string }).command)).toEqual([first, second]);
    expect(lc.instances[0].stop).toHaveBeenCalledOnce();
    expect(lc.instances[1].stop).not.toHaveBeenCalled();
  });

  it('offers the settings when no interpreter is found', async () => {
    const { client } = makeClient();
    await client.start();
    expect(lc.instances).toHaveLength(0);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
      'ASAP needs its Python server, which is not installed. Install it in a venv of its own (from your package index), or set asap.python.',
      'Open Settings',
      'Show Output',
    );
  });
  it('hands asap.store and the stored password to the server; the password reaches no log line', async () => {
    const PW = 'Tr0ub4dor&3';
    const url = 'postgresql://asap@db.team.example:5432/asap';
    Object.assign(settings, { python: fakePython('store', 0), store: url });
    const { client, log, written } = makeClient({ 'asap.storePassword': PW });
    await client.start();
    const [, , serverOptions, clientOptions] = lc.instances[0].args as [string, string, any, any];
    expect(serverOptions.options.env.ASAP_STORE).toBe(url);
    expect(serverOptions.options.env.PGPASSWORD).toBe(PW);
    expect(log.lines).toContain(`info Shared store: ${url}`);
    expect(vscode.window.showWarningMessage).not.toHaveBeenCalled(); // no password in the URL: nothing to say
    // the server's stderr and the protocol trace pass through the client's channel: masked there
    const out = clientOptions.outputChannel;
    out.appendLine(`[Trace - 10:11:12 PM] Sending request 'initialize' {"store": "postgresql://asap:${PW}@db/asap"}`);
    out.append(`psycopg: password authentication failed (${PW})\n`);
    expect(written).toEqual([
      `info Sending request 'initialize' {"store": "postgresql://asap:***@db/asap"}`,
      'info psycopg: password authentication failed (***)',
    ]);
    expect([...log.lines, ...written].join('\n')).not.toContain(PW);
    await client.stop();
  });

  it('warns once, without the password, about a password written in asap.store, and offers the command', async () => {
    const PW = 'hunter2-in-settings';
    Object.assign(settings, { python: fakePython('store2', 0), store: `postgresql://asap:${PW}@db/asap` });
    const { client, log, written } = makeClient();
    await client.start();
    await client.restart();
    expect(vscode.window.showWarningMessage).toHaveBeenCalledOnce();
    const [message, ...actions] = vscode.window.showWarningMessage.mock.calls[0] as string[];
    expect(message).toMatch(/^ASAP: the asap\.store URL contains a password\./);
    expect(message).toContain('ASAP: Set Shared Store Password');
    expect(actions).toEqual(['Set Shared Store Password', 'Open Settings']);
    expect(log.lines).toContain('info Shared store: postgresql://asap:***@db/asap');
    const env = (lc.instances[1].args[2] as any).options.env;
    expect(env.ASAP_STORE).toBe(`postgresql://asap:${PW}@db/asap`); // the server still connects with it
    expect(env.PGPASSWORD).toBeUndefined();
    const out = (lc.instances[1].args[3] as any).outputChannel;
    out.appendLine(`the server said ${PW}`); // the URL's password, alone, in a server line
    expect([...log.lines, ...written, message].join('\n')).not.toContain(PW);
    await client.stop();
  });

  it('restarts the server when asap.store changes, and registers ASAP: Set Shared Store Password', async () => {
    Object.assign(settings, { python: fakePython('store3', 0) });
    const { client, log } = makeClient();
    await client.start();
    expect(vscode.registered.has('asap.setStorePassword')).toBe(true);
    vscode.configListener?.({ affectsConfiguration: (s: string) => s === 'asap.defaultSlice' });
    settings.store = 'postgresql://asap@db/asap';
    vscode.configListener?.({ affectsConfiguration: (s: string) => s === 'asap.store' });
    await client.stop(); // queued after the restart
    expect(lc.instances).toHaveLength(2);
    expect((lc.instances[1].args[2] as any).options.env.ASAP_STORE).toBe('postgresql://asap@db/asap');
    expect(log.lines).toContain('info asap.store changed; restarting the server');
    client.dispose();
  });

  it("in Restricted Mode runs the user's interpreter with user-level settings, then everything once trusted", async () => {
    // a cloned repository: its own .venv and .vscode/settings.json choosing interpreters and Claude
    const ws = path.join(tmp, 'cloned');
    fs.mkdirSync(path.join(ws, '.venv', 'bin'), { recursive: true });
    fs.copyFileSync(fakePython('ws-venv', 0), path.join(ws, '.venv', 'bin', 'python'));
    fs.mkdirSync(path.join(tmp, 'extension'), { recursive: true }); // the server's directory in Restricted Mode
    vscode.workspace.workspaceFolders = [{ uri: { fsPath: ws } }];
    const user = fakePython('user', 0);
    userSettings.python = user;
    Object.assign(settings, {
      python: path.join(ws, 'evil-python'),
      maxtextPython: path.join(ws, 'bin', 'python'),
      maxtextPath: ws,
      llm: 'auto',
      defaultSlice: 'v5e-256',
    });
    vscode.workspace.isTrusted = false;
    const { client, log } = makeClient();
    await client.start();

    expect(lc.instances).toHaveLength(1);
    const [, , serverOptions, clientOptions] = lc.instances[0].args as [string, string, any, any];
    expect(serverOptions.command).toBe(user);
    expect(serverOptions.options.cwd).toBe(path.join(tmp, 'extension')); // not the workspace: -m puts it on sys.path
    expect(clientOptions.initializationOptions).toEqual({
      settings: { python: user, defaultSlice: 'v5e-256', llm: 'off', trusted: false },
    });
    expect(log.lines.join('\n')).toContain('Restricted Mode: the workspace is not trusted');
    // the server's workspace/configuration pull gets the same restricted section; other sections pass through
    const pulled = await clientOptions.middleware.workspace.configuration(
      { items: [{ section: 'asap' }, { section: 'editor' }] },
      undefined,
      async () => [{ ...settings }, { tabSize: 2 }],
    );
    expect(pulled).toEqual([{ python: user, defaultSlice: 'v5e-256', llm: 'off', trusted: false }, { tabSize: 2 }]);

    // the user trusts the folder: the server restarts with the workspace's own interpreter and settings
    vscode.workspace.isTrusted = true;
    delete settings.python;
    delete userSettings.python;
    vscode.grantListener?.();
    await client.stop(); // queued after the restart
    expect(lc.instances).toHaveLength(2);
    const [, , trustedServer, trustedOptions] = lc.instances[1].args as [string, string, any, any];
    expect(trustedServer.command).toBe(path.join(ws, '.venv', 'bin', 'python'));
    expect(trustedServer.options.cwd).toBe(ws);
    expect(trustedOptions.initializationOptions.settings).toEqual({ ...settings });
    expect(log.lines).toContain('info The workspace is trusted now; restarting the server with its settings');
    client.dispose();
  });

  it("passes over a workspace .venv without ASAP to the server venv Install Server made", async () => {
    // a MaxText checkout's own .venv: no ASAP in it
    const ws = path.join(tmp, 'maxtext-ws');
    fs.mkdirSync(path.join(ws, '.venv', 'bin'), { recursive: true });
    fs.copyFileSync(fakePython('no-asap', 1, "ModuleNotFoundError: No module named 'server'"), path.join(ws, '.venv', 'bin', 'python'));
    vscode.workspace.workspaceFolders = [{ uri: { fsPath: ws } }];
    const storage = path.join(tmp, 'storage-installed');
    const installed = versionPython(path.join(storage, 'server-venv', 'bin', 'python'), '0.1.0');
    const states: string[] = [];
    const { client, log } = makeClient(undefined, { globalStorage: storage, states });
    await client.start();

    expect(lc.instances).toHaveLength(1);
    expect((lc.instances[0].args[2] as { command: string }).command).toBe(installed);
    expect(log.lines).toContain(
      `warn Cannot start the server with ${path.join(ws, '.venv', 'bin', 'python')} (workspace venv): ModuleNotFoundError: No module named 'server'`,
    );
    expect(log.lines).toContain(`info ${installed} can import server and pygls (ASAP 0.1.0)`);
    expect(states).toEqual(['starting', 'running']);
    expect(vscode.window.showErrorMessage).not.toHaveBeenCalled();
    expect(vscode.window.showInformationMessage).not.toHaveBeenCalled(); // no wheel carried: no upgrade to offer
    await client.stop();
  });

  it('refuses a server of another minor version and offers Install Server when the extension carries a wheel', async () => {
    const ext = path.join(tmp, 'ext-with-wheel');
    fs.mkdirSync(path.join(ext, 'wheels'), { recursive: true });
    fs.writeFileSync(path.join(ext, 'wheels', 'asap-0.1.0-py3-none-any.whl'), '');
    const old = versionPython(path.join(tmp, 'old', 'python'), '0.0.9');
    settings.python = old;
    const states: string[] = [];
    const { client, log } = makeClient(undefined, { extensionPath: ext, globalStorage: path.join(tmp, 'empty-storage'), states });
    await client.start();

    expect(lc.instances).toHaveLength(0);
    expect(states).toEqual(['not installed']);
    expect(log.lines).toContain(`error Cannot start the server with ${old} (setting): it has ASAP 0.0.9; this extension (0.1.0) needs 0.1.x`);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
      `ASAP: ${old} cannot run this extension's server: it has ASAP 0.0.9; this extension (0.1.0) needs 0.1.x. Upgrade it, or install the server.`,
      'Install Server',
      'Open Settings',
      'Show Output',
    );
    // the setting is the user's choice: the server venv after it is not tried
    expect(log.lines.join('\n')).not.toContain('server venv');
  });

  it('offers the upgrade, once, when the server venv is older than the wheel the extension carries', async () => {
    const ext = path.join(tmp, 'ext-newer-wheel');
    fs.mkdirSync(path.join(ext, 'wheels'), { recursive: true });
    fs.writeFileSync(path.join(ext, 'wheels', 'asap-0.1.2-py3-none-any.whl'), '');
    const storage = path.join(tmp, 'storage-older');
    versionPython(path.join(storage, 'server-venv', 'bin', 'python'), '0.1.0');
    const { client } = makeClient(undefined, { extensionPath: ext, globalStorage: storage });
    await client.start();
    await client.restart();

    expect(lc.instances).toHaveLength(2); // the older server runs meanwhile: same minor version
    expect(vscode.window.showInformationMessage).toHaveBeenCalledTimes(1);
    expect(vscode.window.showInformationMessage).toHaveBeenCalledWith(
      'ASAP: this extension carries server 0.1.2; the installed one is 0.1.0.',
      'Upgrade Server',
    );
    await client.stop();
  });

  it("declares the restricted settings package.json's untrustedWorkspaces lists", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));
    const trust = pkg.capabilities.untrustedWorkspaces;
    expect(trust.supported).toBe('limited');
    expect(trust.description).toMatch(/Verify/);
    expect(trust.restrictedConfigurations).toEqual(RESTRICTED_SETTINGS.map((k) => `asap.${k}`));
    for (const key of trust.restrictedConfigurations) expect(pkg.contributes.configuration.properties[key]).toBeDefined();
  });
});
