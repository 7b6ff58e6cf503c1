/**
 * ASAP's MCP server offered to the editor's MCP clients (VS Code's agent mode): `<python> -m server mcp` over stdio,
 * on the interpreter the language client found and checked for the language server (client.ts), registered with
 * `vscode.lm.registerMcpServerDefinitionProvider` under the id package.json contributes (`asap.mcp`).
 *
 * - The API is VS Code 1.101's. An older host lacks it, or (1.100) has it as a proposal that an installed extension
 *   may not call: either is logged once and nothing is registered; the rest of the extension works as before.
 * - The definition follows the language server's interpreter: a restart, *Install Server* or a change of asap.python
 *   that finds another interpreter or ASAP version fires `onDidChangeMcpServerDefinitions`, and so does
 *   `asap.mcp.enabled`. No usable interpreter: no definition.
 * - Environment: VS Code starts the server with its own environment plus the definition's `env`, where `null`
 *   removes a variable. The Anthropic key (`ANTHROPIC_*`) is removed: the agent that calls the tools is the reasoner,
 *   and the server runs ASAP's offline engine only. The shared store (asap.store as `ASAP_STORE`, its password from
 *   SecretStorage as `PGPASSWORD`: store.ts) is added when VS Code starts the server (`resolveMcpServerDefinition`),
 *   not in the listed definition: VS Code keeps listed definitions in its storage to show them before the extension
 *   activates, and a password must not be written there.
 * - Restricted Mode: no definition. The MCP tools compile (verify, with asap.maxtextPython) and write files
 *   (apply_proposal with `write: true`); the language server refuses those in an untrusted workspace through the
 *   settings it is started with, which an MCP client does not send. Trusting the workspace restarts the language
 *   client, whose new launch brings the definition.
 */
import * as vscode from 'vscode';

import type { ServerLaunch } from './client';
import type { Logger } from './log';
import { STORE_PASSWORD_KEY, storeEnv } from './store';

export const MCP_PROVIDER_ID = 'asap.mcp'; // package.json contributes.mcpServerDefinitionProviders
export const MCP_LABEL = 'ASAP';
export const MCP_ARGS = ['-m', 'server', 'mcp'] as const;

type McpEnv = Record<string, string | number | null>;

/** The parts of VS Code 1.101's MCP API used here (declared locally: @types/vscode stays at the engines' 1.100). */
export interface McpStdioDefinition {
  label: string;
  command: string;
  args: string[];
  cwd?: vscode.Uri;
  env: McpEnv;
  version?: string;
}

export interface McpProvider {
  onDidChangeMcpServerDefinitions: vscode.Event<void>;
  provideMcpServerDefinitions(): Promise<McpStdioDefinition[]>;
  resolveMcpServerDefinition(definition: McpStdioDefinition): Promise<McpStdioDefinition>;
}

export interface McpHost {
  version: string;
  lm?: { registerMcpServerDefinitionProvider?: (id: string, provider: McpProvider) => vscode.Disposable };
  McpStdioServerDefinition?: new (
    label: string,
    command: string,
    args?: string[],
    env?: McpEnv,
    version?: string,
  ) => McpStdioDefinition;
}

/** Where the language server runs now (AsapClient). */
export interface LaunchSource {
  readonly launch: ServerLaunch | undefined;
  onDidChangeLaunch(listener: (launch: ServerLaunch | undefined) => void): vscode.Disposable;
}

/** asap.mcp.enabled: off when any level (default, user, workspace, folder) says false, so that a workspace can turn
 * the server off but not on against the user's setting. */
export function mcpEnabled(): boolean {
  const cfg = vscode.workspace.getConfiguration('asap');
  const seen = cfg.inspect<boolean>('mcp.enabled');
  if (!seen) return cfg.get<boolean>('mcp.enabled', true) !== false;
  return ![seen.defaultValue, seen.globalValue, seen.workspaceValue, seen.workspaceFolderValue].includes(false);
}

/** The variables the MCP server must not inherit from the editor: the Anthropic key and its kin, as null (unset). */
export function withoutAnthropic(base: NodeJS.ProcessEnv): McpEnv {
  const env: McpEnv = { ANTHROPIC_API_KEY: null };
  for (const key of Object.keys(base)) if (/^ANTHROPIC_/i.test(key)) env[key] = null;
  return env;
}

const launchKey = (l: ServerLaunch | undefined): string =>
  l ? JSON.stringify([l.python, l.version, l.cwd ?? '', l.trusted]) : '';

export class AsapMcpProvider implements McpProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeMcpServerDefinitions = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [this.changed];
  private offered = '';
  /** the language client has finished an interpreter discovery (before: its first start is still looking) */
  private discovered: boolean;

  constructor(
    private readonly host: McpHost,
    private readonly source: LaunchSource,
    private readonly secrets: vscode.SecretStorage,
    private readonly log: Logger,
    private readonly baseEnv: NodeJS.ProcessEnv = process.env,
  ) {
    let last = launchKey(source.launch);
    this.discovered = source.launch !== undefined;
    this.disposables.push(
      source.onDidChangeLaunch((launch) => {
        this.discovered = true;
        const key = launchKey(launch);
        if (key === last) return;
        last = key;
        this.log.info('MCP: the server interpreter changed; updating the MCP server definition');
        this.changed.fire();
      }),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (!e.affectsConfiguration('asap.mcp.enabled')) return;
        this.log.info(`MCP: asap.mcp.enabled is ${mcpEnabled() ? 'on' : 'off'}`);
        this.changed.fire();
      }),
    );
  }

  /** One definition, `<python> -m server mcp`, or none (setting off, no interpreter, Restricted Mode), said in the log
   * when it changes. */
  async provideMcpServerDefinitions(): Promise<McpStdioDefinition[]> {
    const launch = this.source.launch;
    const why = !mcpEnabled()
      ? 'asap.mcp.enabled is off'
      : !launch
        ? this.discovered
          ? 'no Python with ASAP was found for the language server'
          : 'the language server is still looking for its Python'
        : !launch.trusted
          ? 'the workspace is not trusted (Restricted Mode)'
          : undefined;
    if (why || !launch) {
      this.say(`MCP: no ASAP MCP server offered: ${why}`);
      return [];
    }
    this.say(
      `MCP: offering ${launch.python} ${MCP_ARGS.join(' ')} (ASAP ${launch.version}, cwd ${launch.cwd ?? 'unset'})`,
    );
    return [this.definition(launch.python, [...MCP_ARGS], withoutAnthropic(this.baseEnv), launch.version, launch.cwd)];
  }

  /** VS Code starts the server: add the shared store's URL and password (SecretStorage, read now). */
  async resolveMcpServerDefinition(definition: McpStdioDefinition): Promise<McpStdioDefinition> {
    const setting = vscode.workspace.getConfiguration('asap').get<string>('store', '');
    const store = storeEnv(setting, await this.secrets.get(STORE_PASSWORD_KEY), this.baseEnv);
    const env: McpEnv = { ...definition.env };
    for (const [key, value] of Object.entries(store.env)) {
      if (value !== undefined && value !== this.baseEnv[key] && !/^ANTHROPIC_/i.test(key)) env[key] = value;
    }
    this.log.info(`MCP: starting ${definition.command} ${definition.args.join(' ')}`);
    const cwd = definition.cwd?.fsPath;
    return this.definition(definition.command, [...definition.args], env, definition.version, cwd);
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }

  private definition(command: string, args: string[], env: McpEnv, version?: string, cwd?: string): McpStdioDefinition {
    const Definition = this.host.McpStdioServerDefinition;
    const def: McpStdioDefinition = Definition
      ? new Definition(MCP_LABEL, command, args, env, version)
      : { label: MCP_LABEL, command, args, env, version };
    if (cwd) def.cwd = vscode.Uri.file(cwd);
    return def;
  }

  private say(line: string): void {
    if (line === this.offered) return;
    this.offered = line;
    this.log.info(line);
  }
}

/** Register the provider when the host has VS Code 1.101's MCP API; otherwise log why not and register nothing. */
export function registerMcpServer(
  source: LaunchSource,
  secrets: vscode.SecretStorage,
  log: Logger,
  host: McpHost = vscode as unknown as McpHost,
): vscode.Disposable {
  const register = host.lm?.registerMcpServerDefinitionProvider;
  if (typeof register !== 'function' || typeof host.McpStdioServerDefinition !== 'function') {
    log.info(`MCP: VS Code ${host.version} has no MCP server API (1.101 or later); ASAP's MCP server is not offered`);
    return { dispose: () => undefined };
  }
  const provider = new AsapMcpProvider(host, source, secrets, log);
  try {
    const registration = register.call(host.lm, MCP_PROVIDER_ID, provider);
    log.info(`MCP: ASAP's MCP server provider is registered (${MCP_PROVIDER_ID}, VS Code ${host.version})`);
    return {
      dispose: () => {
        registration.dispose();
        provider.dispose();
      },
    };
  } catch (err) {
    // VS Code 1.100 has the function behind a proposal that installed extensions may not use
    provider.dispose();
    log.info(`MCP: VS Code ${host.version} refused the MCP server provider (${String(err)}); ASAP's MCP server is not offered`);
    return { dispose: () => undefined };
  }
}
