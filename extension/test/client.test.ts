import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

const settings: Record<string, unknown> = {};
const vscode = vi.hoisted(() => ({
  workspace: {
    workspaceFolders: [] as { uri: { fsPath: string } }[],
    getConfiguration: () => {
      const cfg = { ...settings };
      Object.defineProperty(cfg, 'get', { value: (k: string, d: unknown) => settings[k] ?? d, enumerable: false });
      return cfg;
    },
  },
  window: {
    showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
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
  commands: { executeCommand: vi.fn() },
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

import { AsapClient } from '../src/client';
import { memoryLogger } from './helpers';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'asap-client-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function fakePython(name: string, exitCode: number, stderr = ''): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, `#!/bin/sh\necho "${stderr}" >&2\nexit ${exitCode}\n`, { mode: 0o755 });
  return file;
}

function makeClient() {
  const log = memoryLogger();
  const secrets = { get: vi.fn(async () => 'sk-ant-test-SECRET123') };
  const context = { extensionPath: path.join(tmp, 'extension'), secrets };
  const channel = { show: vi.fn() };
  return { log, client: new AsapClient(context as never, channel as never, log) };
}

beforeEach(() => {
  for (const k of Object.keys(settings)) delete settings[k];
  lc.instances.length = 0;
  vscode.window.showErrorMessage.mockClear();
});

describe.skipIf(process.platform === 'win32')('AsapClient', () => {
  it('starts `<python> -m server` for YAML files with the asap settings', async () => {
    const py = fakePython('ok', 0);
    Object.assign(settings, { python: py, defaultSlice: 'v5e-256' });
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
    ]);
    expect(clientOptions.synchronize).toEqual({ configurationSection: 'asap' });
    expect(clientOptions.initializationOptions).toEqual({ settings: { python: py, defaultSlice: 'v5e-256' } });
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
    expect(log.lines).toContain(`error Cannot start the server with ${py}: ModuleNotFoundError: No module named 'server'`);
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
      'ASAP could not find a Python interpreter to run its server. Set asap.python.',
      'Open Settings',
      'Show Output',
    );
  });
});
