/** The Anthropic API key: kept in VS Code's SecretStorage, handed to the server process in its environment only. */
import * as vscode from 'vscode';

import type { Logger } from './log';
import { STORE_PASSWORD_KEY, storeEnv, type StoreEnv } from './store';

export const SECRET_KEY = 'asap.anthropicApiKey';

/** The environment for the server process: the user's, plus the key from SecretStorage when one is stored. */
export async function serverEnv(secrets: vscode.SecretStorage, base: NodeJS.ProcessEnv): Promise<NodeJS.ProcessEnv> {
  const key = await secrets.get(SECRET_KEY);
  return key ? { ...base, ANTHROPIC_API_KEY: key } : { ...base };
}

/** serverEnv, plus the shared store (asap.store as ASAP_STORE, its password from SecretStorage as PGPASSWORD:
 * store.ts), with what the caller must warn about and keep out of the logs. */
export async function serverEnvWithStore(
  secrets: vscode.SecretStorage,
  base: NodeJS.ProcessEnv,
  store: string,
): Promise<StoreEnv> {
  return storeEnv(store, await secrets.get(STORE_PASSWORD_KEY), await serverEnv(secrets, base));
}

/** "ASAP: Set API Key": ask for the key (masked), store it (or remove it when left empty), restart the server. */
export async function setApiKey(secrets: vscode.SecretStorage, restart: () => Promise<void>, log: Logger): Promise<boolean> {
  const value = await vscode.window.showInputBox({
    title: 'ASAP: Anthropic API key',
    prompt: 'Stored in VS Code secret storage; leave empty to remove it. ASAP works offline without one.',
    password: true,
    ignoreFocusOut: true,
  });
  if (value === undefined) return false;
  const key = value.trim();
  if (key) {
    await secrets.store(SECRET_KEY, key);
    log.info('Anthropic API key stored in secret storage; restarting the server so it can use Claude');
  } else {
    await secrets.delete(SECRET_KEY);
    log.info('Anthropic API key removed; ASAP uses its offline engine');
  }
  await restart();
  return true;
}
