/** The team's shared experiment log (asap.store): its URL reaches the server process as ASAP_STORE, its password
 * from VS Code's SecretStorage as PGPASSWORD (libpq and psycopg read it; ~/.pgpass works as well), and neither is
 * ever written to the ASAP output channel. */
import * as vscode from 'vscode';

import { type Logger, URL_PASSWORD } from './log';

export const STORE_PASSWORD_KEY = 'asap.storePassword';
export const SET_STORE_PASSWORD = 'asap.setStorePassword';

const PG_URL = /^postgres(?:ql)?:\/\//i;
const MIN_SECRET = 4; // shorter "passwords" are not searched for in log lines (they would mask ordinary words)

/** `text` with the password of any postgresql:// URL in it, and each of `secrets`, as `***`. */
export function redactStore(text: string, secrets: readonly string[] = []): string {
  let out = text.replace(URL_PASSWORD, '$1***@');
  for (const s of secrets) if (s.length >= MIN_SECRET) out = out.split(s).join('***');
  return out;
}

/** The password written in a postgresql:// URL (decoded), if any. */
export function urlPassword(url: string): string | undefined {
  const m = /^postgres(?:ql)?:\/\/([^:/@\s]*):([^@\s]*)@/i.exec(url.trim());
  if (!m || m[2] === '') return undefined;
  try {
    return decodeURIComponent(m[2]);
  } catch {
    return m[2];
  }
}

export interface StoreEnv {
  env: NodeJS.ProcessEnv;
  /** the shared store's URL the server gets (the setting, else ASAP_STORE of VS Code's environment), if any */
  url?: string;
  /** the URL itself carries a password (settings sync may copy it): warn, without showing it */
  passwordInUrl: boolean;
  /** asap.store is set but is not a postgresql:// URL: the server keeps the local sqlite store */
  notPostgres: boolean;
  /** what must never reach a log line: the URL's password and the stored one */
  secrets: string[];
}

/** The server process's environment for the shared store. `setting` (asap.store, trimmed) wins over the
 * environment's ASAP_STORE; empty: the environment's (the CLI's variable), else the local sqlite store. The stored
 * password becomes PGPASSWORD when the store is a postgresql:// URL without a password of its own (libpq prefers
 * the URL's; PGPASSWORD beats ~/.pgpass). */
export function storeEnv(setting: string, password: string | undefined, base: NodeJS.ProcessEnv): StoreEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  const set = setting.trim();
  if (set) env.ASAP_STORE = set;
  const url = (env.ASAP_STORE ?? '').trim() || undefined;
  const postgres = url !== undefined && PG_URL.test(url);
  const inUrl = postgres ? urlPassword(url) : undefined;
  if (postgres && password && inUrl === undefined) env.PGPASSWORD = password;
  return {
    env,
    url,
    passwordInUrl: inUrl !== undefined,
    notPostgres: set !== '' && !postgres,
    secrets: [inUrl, password, base.PGPASSWORD].filter((s): s is string => !!s),
  };
}

/** "ASAP: Set Shared Store Password": ask for the password (masked), keep it in SecretStorage (or remove it when
 * left empty), restart the server so that it connects with it. */
export async function setStorePassword(
  secrets: vscode.SecretStorage,
  restart: () => Promise<void>,
  log: Logger,
): Promise<boolean> {
  const value = await vscode.window.showInputBox({
    title: 'ASAP: password of the shared store (asap.store)',
    prompt:
      'Kept in VS Code secret storage and given to the ASAP server as PGPASSWORD; never in settings.json. ' +
      'Leave empty to remove it (then ~/.pgpass or PGPASSWORD is used).',
    password: true,
    ignoreFocusOut: true,
  });
  if (value === undefined) return false;
  if (value !== '') {
    await secrets.store(STORE_PASSWORD_KEY, value);
    log.info('Shared store password stored in secret storage; restarting the server');
  } else {
    await secrets.delete(STORE_PASSWORD_KEY);
    log.info('Shared store password removed; restarting the server');
  }
  await restart();
  return true;
}

/** The warning for a password written in asap.store's URL: it names the setting and what to do, not the password. */
export const PASSWORD_IN_URL =
  'ASAP: the asap.store URL contains a password. settings.json is copied by Settings Sync and shared with ' +
  'workspaces: remove the password from the URL and run "ASAP: Set Shared Store Password" (VS Code secret ' +
  'storage), or use ~/.pgpass.';

/** asap.store set to something else than a postgresql:// URL (the value is not repeated: it may hold a secret). */
export const NOT_POSTGRES =
  'ASAP: asap.store is not a postgresql:// URL (postgresql://USER@HOST:5432/DB): the experiment log stays in the ' +
  'local sqlite store.';
