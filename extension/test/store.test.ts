import { beforeEach, describe, expect, it, vi } from 'vitest';

const vscode = vi.hoisted(() => ({ window: { showInputBox: vi.fn() } }));
vi.mock('vscode', () => vscode);

import { SECRET_KEY, serverEnvWithStore } from '../src/apiKey';
import { redactStore, setStorePassword, STORE_PASSWORD_KEY, storeEnv, urlPassword } from '../src/store';
import { memoryLogger } from './helpers';

function secrets(initial: Record<string, string> = {}) {
  const store = new Map<string, string>(Object.entries(initial));
  return {
    store: vi.fn(async (k: string, v: string) => void store.set(k, v)),
    get: vi.fn(async (k: string) => store.get(k)),
    delete: vi.fn(async (k: string) => void store.delete(k)),
    onDidChange: vi.fn(),
    keys: vi.fn(async () => [...store.keys()]),
    map: store,
  };
}

const PW = 'Tr0ub4dor&3';
const URL_NO_PW = 'postgresql://asap@db.team.example:5432/asap';

describe('redactStore', () => {
  it("masks a postgresql:// URL's password wherever it appears, and the known secrets", () => {
    expect(redactStore(`connecting to postgresql://asap:${PW}@db:5432/asap now`)).toBe(
      'connecting to postgresql://asap:***@db:5432/asap now',
    );
    expect(redactStore('postgres://u:p%40ss@h/db and POSTGRESQL://v:x@h2/db')).toBe(
      'postgres://u:***@h/db and POSTGRESQL://v:***@h2/db',
    );
    expect(redactStore(URL_NO_PW)).toBe(URL_NO_PW); // nothing to hide
    expect(redactStore(`psycopg said: password "${PW}" refused`, [PW])).toBe('psycopg said: password "***" refused');
    // a secret too short to search for is not masked in ordinary words
    expect(redactStore('the asap store', ['as'])).toBe('the asap store');
  });

  it("reads a URL's password (decoded), and none when there is none", () => {
    expect(urlPassword(`postgresql://asap:${encodeURIComponent(PW)}@db/asap`)).toBe(PW);
    expect(urlPassword(URL_NO_PW)).toBeUndefined();
    expect(urlPassword('postgresql://asap:@db/asap')).toBeUndefined();
    expect(urlPassword('mysql://a:b@h/db')).toBeUndefined();
  });
});

describe('storeEnv', () => {
  const base = { PATH: '/bin' };

  it('hands asap.store to the server as ASAP_STORE and the stored password as PGPASSWORD', () => {
    const s = storeEnv(` ${URL_NO_PW} `, PW, base);
    expect(s.env).toEqual({ PATH: '/bin', ASAP_STORE: URL_NO_PW, PGPASSWORD: PW });
    expect(s).toMatchObject({ url: URL_NO_PW, passwordInUrl: false, notPostgres: false, secrets: [PW] });
  });

  it('empty: the environment decides (its ASAP_STORE, else the local store); ~/.pgpass and PGPASSWORD stay', () => {
    expect(storeEnv('', undefined, base)).toEqual({
      env: base,
      url: undefined,
      passwordInUrl: false,
      notPostgres: false,
      secrets: [],
    });
    const fromEnv = storeEnv('', undefined, { ...base, ASAP_STORE: URL_NO_PW, PGPASSWORD: PW });
    expect(fromEnv.env).toEqual({ ...base, ASAP_STORE: URL_NO_PW, PGPASSWORD: PW });
    expect(fromEnv.secrets).toEqual([PW]); // the environment's password is kept out of the logs too
    // the setting wins over the environment's variable
    expect(storeEnv(URL_NO_PW, undefined, { ASAP_STORE: 'postgresql://other@h/db' }).env.ASAP_STORE).toBe(URL_NO_PW);
  });

  it("flags a password written in the URL (and keeps it: libpq prefers it), never adding PGPASSWORD", () => {
    const url = `postgresql://asap:${PW}@db/asap`;
    const s = storeEnv(url, 'from-secret-storage', base);
    expect(s.passwordInUrl).toBe(true);
    expect(s.env.ASAP_STORE).toBe(url);
    expect(s.env.PGPASSWORD).toBeUndefined();
    expect(s.secrets).toEqual([PW, 'from-secret-storage']);
  });

  it('says so when asap.store is not a postgresql:// URL, and gives no password then', () => {
    const s = storeEnv('sqlite:///tmp/x.db', PW, base);
    expect(s.notPostgres).toBe(true);
    expect(s.env.PGPASSWORD).toBeUndefined();
  });

  it('joins the Anthropic key and the store password from SecretStorage', async () => {
    const s = secrets({ [SECRET_KEY]: 'sk-ant-test-KEY', [STORE_PASSWORD_KEY]: PW });
    const out = await serverEnvWithStore(s as never, base, URL_NO_PW);
    expect(out.env).toEqual({
      PATH: '/bin',
      ANTHROPIC_API_KEY: 'sk-ant-test-KEY',
      ASAP_STORE: URL_NO_PW,
      PGPASSWORD: PW,
    });
    expect((await serverEnvWithStore(secrets() as never, base, '')).env).toEqual(base);
  });
});

describe('ASAP: Set Shared Store Password', () => {
  beforeEach(() => vscode.window.showInputBox.mockReset());

  it('keeps the password in SecretStorage, restarts the server, and never logs it', async () => {
    const s = secrets();
    const restart = vi.fn(async () => undefined);
    const log = memoryLogger();
    vscode.window.showInputBox.mockResolvedValue(PW);
    expect(await setStorePassword(s as never, restart, log)).toBe(true);
    expect(s.map.get(STORE_PASSWORD_KEY)).toBe(PW);
    expect(restart).toHaveBeenCalledOnce();
    expect(vscode.window.showInputBox.mock.calls[0][0]).toMatchObject({ password: true });
    expect(log.lines.join('\n')).not.toContain(PW);
  });

  it('removes it when left empty, and does nothing when dismissed', async () => {
    const s = secrets({ [STORE_PASSWORD_KEY]: PW });
    const restart = vi.fn(async () => undefined);
    vscode.window.showInputBox.mockResolvedValue('');
    await setStorePassword(s as never, restart, memoryLogger());
    expect(s.map.has(STORE_PASSWORD_KEY)).toBe(false);
    expect(restart).toHaveBeenCalledOnce();
    vscode.window.showInputBox.mockResolvedValue(undefined);
    restart.mockClear();
    expect(await setStorePassword(s as never, restart, memoryLogger())).toBe(false);
    expect(restart).not.toHaveBeenCalled();
  });
});
