import { beforeEach, describe, expect, it, vi } from 'vitest';

const vscode = vi.hoisted(() => ({ window: { showInputBox: vi.fn() } }));
vi.mock('vscode', () => vscode);

import { SECRET_KEY, serverEnv, setApiKey } from '../src/apiKey';
import { memoryLogger } from './helpers';

function secrets(initial?: string) {
  const store = new Map<string, string>(initial ? [[SECRET_KEY, initial]] : []);
  return {
    store: vi.fn(async (k: string, v: string) => void store.set(k, v)),
    get: vi.fn(async (k: string) => store.get(k)),
    delete: vi.fn(async (k: string) => void store.delete(k)),
    onDidChange: vi.fn(),
    keys: vi.fn(async () => [...store.keys()]),
    map: store,
  };
}

const KEY = 'sk-ant-test-SECRET123';

describe('API key', () => {
  beforeEach(() => vscode.window.showInputBox.mockReset());

  it('stores the key in SecretStorage, restarts the server, and never logs it', async () => {
    const s = secrets();
    const restart = vi.fn(async () => undefined);
    const log = memoryLogger();
    vscode.window.showInputBox.mockResolvedValue(`  ${KEY} `);
    expect(await setApiKey(s as never, restart, log)).toBe(true);
    expect(s.map.get(SECRET_KEY)).toBe(KEY);
    expect(restart).toHaveBeenCalledOnce();
    expect(vscode.window.showInputBox.mock.calls[0][0]).toMatchObject({ password: true });
    expect(log.lines.join('\n')).not.toContain('SECRET123');
  });

  it('removes the key when left empty, and does nothing when dismissed', async () => {
    const s = secrets(KEY);
    const restart = vi.fn(async () => undefined);
    vscode.window.showInputBox.mockResolvedValue('');
    await setApiKey(s as never, restart, memoryLogger());
    expect(s.map.has(SECRET_KEY)).toBe(false);
    vscode.window.showInputBox.mockResolvedValue(undefined);
    restart.mockClear();
    expect(await setApiKey(s as never, restart, memoryLogger())).toBe(false);
    expect(restart).not.toHaveBeenCalled();
  });

  it('hands the key to the server process in its environment only', async () => {
    const env = await serverEnv(secrets(KEY) as never, { PATH: '/bin' });
    expect(env).toEqual({ PATH: '/bin', ANTHROPIC_API_KEY: KEY });
    expect(await serverEnv(secrets() as never, { PATH: '/bin' })).toEqual({ PATH: '/bin' });
  });
});
