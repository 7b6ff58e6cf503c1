import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

// asap.* settings by level: what inspect() reports (get() answers the workspace's over the user's)
const user: Record<string, unknown> = {};
const workspace: Record<string, unknown> = {};
const vscode = vi.hoisted(() => {
  class EventEmitter<T> {
    private listeners = new Set<(e: T) => void>();
    event = (f: (e: T) => void) => {
      this.listeners.add(f);
      return { dispose: () => void this.listeners.delete(f) };
    };
    fire(e: T): void {
      for (const f of [...this.listeners]) f(e);
    }
    dispose(): void {
      this.listeners.clear();
    }
  }
  const configListeners = new Set<(e: { affectsConfiguration: (s: string) => boolean }) => void>();
  return {
    EventEmitter,
    configListeners,
    Uri: { file: (fsPath: string) => ({ fsPath, scheme: 'file' }) },
    workspace: {
      workspaceFolders: [] as { uri: { fsPath: string } }[],
      isTrusted: true,
      onDidGrantWorkspaceTrust: vi.fn(() => ({ dispose: () => undefined })),
      onDidChangeConfiguration: vi.fn((f: (e: { affectsConfiguration: (s: string) => boolean }) => void) => {
        configListeners.add(f);
        return { dispose: () => void configListeners.delete(f) };
      }),
      getConfiguration: vi.fn(),
    },
    window: {
      showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
      showWarningMessage: vi.fn(() => Promise.resolve(undefined)),
      showInformationMessage: vi.fn(() => Promise.resolve(undefined)),
    },
    commands: { executeCommand: vi.fn(), registerCommand: vi.fn(() => ({ dispose: () => undefined })) },
    extensions: { getExtension: vi.fn(() => undefined) },
  };
});
vi.mock('vscode', () => vscode);
vscode.workspace.getConfiguration.mockImplementation(() => {
  const get = (k: string, d: unknown) => workspace[k] ?? user[k] ?? d;
  const inspect = (k: string) => ({
    key: `asap.${k}`,
    defaultValue: k === 'mcp.enabled' ? true : undefined,
    globalValue: user[k],
    workspaceValue: workspace[k],
  });
  return { get, inspect };
});

// the language client (only its start and stop are reached: AsapClient's interpreter discovery is real)
vi.mock('vscode-languageclient/node', () => ({
  LanguageClient: class {
    start = vi.fn(async () => undefined);
    stop = vi.fn(async () => undefined);
    needsStop = () => true;
    onDidChangeState = vi.fn();
    sendNotification = vi.fn(async () => undefined);
  },
  TransportKind: { stdio: 0 },
  State: { Stopped: 1, Starting: 3, Running: 2 },
  WorkDoneProgressCancelNotification: { type: { method: 'window/workDoneProgress/cancel' } },
  CloseAction: { DoNotRestart: 1, Restart: 2 },
  ErrorAction: { Continue: 1, Shutdown: 2 },
}));

import { AsapClient, type ServerLaunch } from '../src/client';
import {
  AsapMcpProvider,
  type LaunchSource,
  MCP_PROVIDER_ID,
  type McpHost,
  type McpProvider,
  type McpStdioDefinition,
  registerMcpServer,
} from '../src/mcp';
import { memoryLogger } from './helpers';

/** VS Code 1.101's class, as the host hands it to extensions. */
class McpStdioServerDefinition implements McpStdioDefinition {
  constructor(
    public label: string,
    public command: string,
    public args: string[] = [],
    public env: Record<string, string | number | null> = {},
    public version?: string,
  ) {}
}

function newHost(register?: (id: string, p: McpProvider) => { dispose(): void }): McpHost & { registered: McpProvider[] } {
  const registered: McpProvider[] = [];
  return {
    version: '1.101.0',
    registered,
    McpStdioServerDefinition,
    lm: {
      registerMcpServerDefinitionProvider:
        register ??
        ((_id: string, p: McpProvider) => {
          registered.push(p);
          return { dispose: () => undefined };
        }),
    },
  } as never;
}

/** A LaunchSource whose launch the test sets, telling listeners as AsapClient does after each start. */
function launches(first?: ServerLaunch): LaunchSource & { set(l: ServerLaunch | undefined): void } {
  const listeners = new Set<(l: ServerLaunch | undefined) => void>();
  const source = {
    launch: first,
    onDidChangeLaunch: (f: (l: ServerLaunch | undefined) => void) => {
      listeners.add(f);
      return { dispose: () => void listeners.delete(f) };
    },
    set(l: ServerLaunch | undefined) {
      source.launch = l;
      for (const f of listeners) f(l);
    },
  };
  return source;
}

const WS = '/home/u/maxtext-configs';
const LAUNCH: ServerLaunch = { python: '/home/u/.venv/bin/python', version: '0.1.0', cwd: WS, trusted: true };
const SECRETS: Record<string, string> = {
  'asap.anthropicApiKey': 'sk-ant-test-SECRET123',
  'asap.storePassword': 'pg-SECRET-456',
};
const secrets = () => ({ get: vi.fn(async (k: string) => SECRETS[k]) });
const BASE_ENV = { PATH: '/usr/bin', HOME: '/home/u', ANTHROPIC_API_KEY: 'sk-ant-env-KEY', ANTHROPIC_BASE_URL: 'http://x' };

function provider(source: LaunchSource, s = secrets()) {
  const log = memoryLogger();
  const p = new AsapMcpProvider(newHost(), source, s as never, log, BASE_ENV);
  let fired = 0;
  p.onDidChangeMcpServerDefinitions(() => void fired++);
  return { p, log, s, fired: () => fired };
}

const changeSetting = (key: string) => {
  for (const f of vscode.configListeners) f({ affectsConfiguration: (s: string) => s === key || key.startsWith(`${s}.`) });
};

beforeEach(() => {
  for (const k of Object.keys(user)) delete user[k];
  for (const k of Object.keys(workspace)) delete workspace[k];
  vscode.configListeners.clear();
  vscode.workspace.isTrusted = true;
  vscode.workspace.workspaceFolders = [];
});

describe('the MCP server definition', () => {
  it('is `<python> -m server mcp` on the language server interpreter, in its cwd, at its ASAP version', async () => {
    const { p } = provider(launches(LAUNCH));
    const defs = await p.provideMcpServerDefinitions();
    expect(defs).toHaveLength(1);
    const [def] = defs;
    expect(def).toBeInstanceOf(McpStdioServerDefinition); // the host's class: VS Code tells stdio from http by it
    expect(def).toMatchObject({ label: 'ASAP', command: LAUNCH.python, args: ['-m', 'server', 'mcp'], version: '0.1.0' });
    expect(def.cwd?.fsPath).toBe(WS);
  });

  it('removes the Anthropic key from the environment VS Code passes on, and never reads the stored one', async () => {
    const { p, s, log } = provider(launches(LAUNCH));
    const [def] = await p.provideMcpServerDefinitions();
    // VS Code merges env over its own environment; null unsets a variable
    expect(def.env).toEqual({ ANTHROPIC_API_KEY: null, ANTHROPIC_BASE_URL: null });
    const started = await p.resolveMcpServerDefinition(def);
    expect(started.env.ANTHROPIC_API_KEY).toBeNull();
    expect(JSON.stringify(started)).not.toContain('SECRET123');
    expect(JSON.stringify(started)).not.toContain('sk-ant-env-KEY');
    expect(s.get).not.toHaveBeenCalledWith('asap.anthropicApiKey');
    expect(log.lines.join('\n')).not.toMatch(/SECRET|sk-ant/);
  });

  it('gets the shared store (URL and stored password) only when VS Code starts it, not in the listed definition', async () => {
    user.store = 'postgresql://asap@db.example:5432/asap';
    const { p, log } = provider(launches(LAUNCH));
    const [def] = await p.provideMcpServerDefinitions();
    expect(JSON.stringify(def)).not.toContain('pg-SECRET-456');
    expect(def.env).not.toHaveProperty('ASAP_STORE');
    const started = await p.resolveMcpServerDefinition(def);
    expect(started).toBeInstanceOf(McpStdioServerDefinition);
    expect(started.env).toMatchObject({
      ASAP_STORE: 'postgresql://asap@db.example:5432/asap',
      PGPASSWORD: 'pg-SECRET-456',
      ANTHROPIC_API_KEY: null,
    });
    expect(started).toMatchObject({ command: LAUNCH.python, args: ['-m', 'server', 'mcp'], version: '0.1.0' });
    expect(started.cwd?.fsPath).toBe(WS);
    expect(log.lines.join('\n')).not.toContain('pg-SECRET-456');
  });

  it('is not offered when asap.mcp.enabled is off at user or workspace level; a workspace cannot turn it on', async () => {
    const { p, fired } = provider(launches(LAUNCH));
    user['mcp.enabled'] = false;
    changeSetting('asap.mcp.enabled');
    expect(fired()).toBe(1);
    expect(await p.provideMcpServerDefinitions()).toEqual([]);
    workspace['mcp.enabled'] = true; // against the user's off
    expect(await p.provideMcpServerDefinitions()).toEqual([]);
    delete user['mcp.enabled'];
    workspace['mcp.enabled'] = false;
    expect(await p.provideMcpServerDefinitions()).toEqual([]);
    delete workspace['mcp.enabled'];
    changeSetting('asap.mcp.enabled');
    expect(fired()).toBe(2);
    expect(await p.provideMcpServerDefinitions()).toHaveLength(1);
    changeSetting('asap.defaultSlice'); // other settings do not concern the definition
    expect(fired()).toBe(2);
  });

  it('is not offered with no usable interpreter, nor in Restricted Mode', async () => {
    const source = launches(undefined);
    const { p, log } = provider(source);
    expect(await p.provideMcpServerDefinitions()).toEqual([]); // before the client's first discovery ends
    expect(log.lines).toEqual(['info MCP: no ASAP MCP server offered: the language server is still looking for its Python']);
    source.set(undefined);
    expect(await p.provideMcpServerDefinitions()).toEqual([]);
    expect(log.lines).toContain('info MCP: no ASAP MCP server offered: no Python with ASAP was found for the language server');
    source.set({ ...LAUNCH, cwd: '/ext', trusted: false });
    expect(await p.provideMcpServerDefinitions()).toEqual([]);
    expect(log.lines).toContain('info MCP: no ASAP MCP server offered: the workspace is not trusted (Restricted Mode)');
  });

  it('fires its change event when the interpreter or its ASAP version changes, not on a restart with the same', async () => {
    const source = launches(LAUNCH);
    const { p, fired } = provider(source);
    source.set({ ...LAUNCH }); // a restart that found the same interpreter
    expect(fired()).toBe(0);
    source.set({ ...LAUNCH, python: '/opt/asap-venv/bin/python' }); // asap.python changed
    expect(fired()).toBe(1);
    expect((await p.provideMcpServerDefinitions())[0].command).toBe('/opt/asap-venv/bin/python');
    source.set({ ...LAUNCH, python: '/opt/asap-venv/bin/python', version: '0.2.0' }); // Install Server's upgrade
    expect(fired()).toBe(2);
    expect((await p.provideMcpServerDefinitions())[0].version).toBe('0.2.0');
    source.set(undefined); // no interpreter any more
    expect(fired()).toBe(3);
    expect(await p.provideMcpServerDefinitions()).toEqual([]);
    p.dispose();
    source.set(LAUNCH);
    expect(fired()).toBe(3);
  });
});

describe('registerMcpServer', () => {
  it('registers the provider under the id package.json contributes', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));
    expect(pkg.contributes.mcpServerDefinitionProviders).toEqual([{ id: MCP_PROVIDER_ID, label: 'ASAP' }]);
    expect(pkg.contributes.configuration.properties['asap.mcp.enabled']).toMatchObject({ type: 'boolean', default: true });
    const ids: string[] = [];
    const host = newHost((id, p) => {
      ids.push(id);
      expect(p).toBeInstanceOf(AsapMcpProvider);
      return { dispose: () => undefined };
    });
    const log = memoryLogger();
    registerMcpServer(launches(LAUNCH), secrets() as never, log, host);
    expect(ids).toEqual(['asap.mcp']);
    expect(log.lines).toContain("info MCP: ASAP's MCP server provider is registered (asap.mcp, VS Code 1.101.0)");
  });

  it('registers nothing on a host without the API (before 1.101), and says so', () => {
    const log = memoryLogger();
    const old = { version: '1.99.3', lm: {} } as McpHost;
    expect(() => registerMcpServer(launches(LAUNCH), secrets() as never, log, old).dispose()).not.toThrow();
    expect(log.lines).toEqual([
      "info MCP: VS Code 1.99.3 has no MCP server API (1.101 or later); ASAP's MCP server is not offered",
    ]);
    registerMcpServer(launches(LAUNCH), secrets() as never, log, { version: '1.90.0' });
    expect(log.lines[1]).toContain('VS Code 1.90.0 has no MCP server API');
  });

  it('registers nothing when the host has the function behind a proposal (VS Code 1.100)', () => {
    const log = memoryLogger();
    const host = newHost(() => {
      throw new Error('Extension asap-dev.asap CANNOT use API proposal: mcpConfigurationProvider.');
    });
    host.version = '1.100.3';
    expect(() => registerMcpServer(launches(LAUNCH), secrets() as never, log, host)).not.toThrow();
    expect(log.lines[0]).toMatch(/^info MCP: VS Code 1\.100\.3 refused the MCP server provider \(.*CANNOT use API proposal/);
    expect(vscode.configListeners.size).toBe(0); // the provider it made is disposed
  });
});

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'asap-mcp-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** An interpreter whose import check passes and says it has ASAP `version`. */
function versionPython(name: string, version: string): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, `#!/bin/sh\necho ${version}\n`, { mode: 0o755 });
  return file;
}

describe.skipIf(process.platform === 'win32')('with the real AsapClient', () => {
  it("follows the interpreter the client's discovery finds, start after start", async () => {
    const first = versionPython('first', '0.1.0');
    const second = versionPython('second', '0.1.3');
    user.python = first;
    vscode.workspace.workspaceFolders = [{ uri: { fsPath: tmp } }];
    const context = {
      extensionPath: path.join(tmp, 'extension'),
      secrets: secrets(),
      globalStorageUri: { fsPath: path.join(tmp, 'global-storage') },
      extension: { packageJSON: { version: '0.1.0' } },
    };
    const channel = { show: vi.fn(), debug: vi.fn(), info: vi.fn(), warn: vi.fn(), error: vi.fn() };
    const client = new AsapClient(context as never, channel as never, memoryLogger());
    const host = newHost();
    const log = memoryLogger();
    registerMcpServer(client, context.secrets as never, log, host);
    const [p] = host.registered;
    let fired = 0;
    p.onDidChangeMcpServerDefinitions(() => void fired++);
    expect(await p.provideMcpServerDefinitions()).toEqual([]); // before the first start

    await client.start();
    expect(fired).toBe(1);
    let [def] = await p.provideMcpServerDefinitions();
    expect(def).toMatchObject({ command: first, args: ['-m', 'server', 'mcp'], version: '0.1.0' });
    expect(def.cwd?.fsPath).toBe(tmp);

    user.python = second;
    await client.restart();
    expect(fired).toBe(2);
    [def] = await p.provideMcpServerDefinitions();
    expect(def).toMatchObject({ command: second, version: '0.1.3' });

    user.python = path.join(tmp, 'missing-python');
    await client.restart();
    expect(fired).toBe(3);
    expect(await p.provideMcpServerDefinitions()).toEqual([]);
    await client.stop();
  });
});
