import { describe, expect, it, vi } from 'vitest';

import {
  type DiscoveryInputs,
  findInterpreter,
  interpreterCandidates,
  substituteVariables,
  venvPython,
} from '../src/interpreter';
import { memoryLogger } from './helpers';

function inputs(over: Partial<DiscoveryInputs> & { files?: string[] } = {}) {
  const files = new Set(over.files ?? []);
  const log = memoryLogger();
  const pythonExtensionInterpreter = vi.fn(async () => undefined as string | undefined);
  const inp: DiscoveryInputs = {
    setting: '',
    workspaceFolders: ['/ws/a', '/ws/b'],
    extensionPath: '/src/asap/extension',
    platform: 'linux',
    exists: (p) => files.has(p),
    pythonExtensionInterpreter,
    log,
    ...over,
  };
  return { inp, log, pythonExtensionInterpreter: inp.pythonExtensionInterpreter as typeof pythonExtensionInterpreter };
}

describe('findInterpreter', () => {
  it('uses the asap.python setting even when venvs exist, and says so', async () => {
    const { inp, log, pythonExtensionInterpreter } = inputs({
      setting: '/opt/py/bin/python3',
      files: ['/ws/a/.venv/bin/python', '/src/asap/.venv/bin/python'],
    });
    expect(await findInterpreter(inp)).toEqual({ path: '/opt/py/bin/python3', source: 'setting' });
    expect(log.lines).toEqual(['info Interpreter: using /opt/py/bin/python3 from the asap.python setting ("/opt/py/bin/python3")']);
    expect(pythonExtensionInterpreter).not.toHaveBeenCalled();
  });

  it('substitutes ${workspaceFolder} in the setting with the first folder', async () => {
    const { inp } = inputs({ setting: '${workspaceFolder}/env/bin/python' });
    expect((await findInterpreter(inp))?.path).toBe('/ws/a/env/bin/python');
  });

  it('resolves a relative setting against the workspace but leaves a bare command for PATH', async () => {
    expect((await findInterpreter(inputs({ setting: '.venv/bin/python' }).inp))?.path).toBe('/ws/a/.venv/bin/python');
    expect((await findInterpreter(inputs({ setting: 'python3' }).inp))?.path).toBe('python3');
  });

  it('skips a ${workspaceFolder} setting when no folder is open and keeps looking', async () => {
    const { inp, log } = inputs({
      setting: '${workspaceFolder}/.venv/bin/python',
      workspaceFolders: [],
      files: ['/src/asap/.venv/bin/python'],
    });
    expect(await findInterpreter(inp)).toEqual({ path: '/src/asap/.venv/bin/python', source: 'ASAP checkout venv' });
    expect(log.lines[0]).toMatch(/^warn .*no folder is open; skipping it/);
  });

  it('finds the venv of a later workspace folder and logs each folder it tried', async () => {
    const { inp, log } = inputs({ files: ['/ws/b/.venv/bin/python', '/src/asap/.venv/bin/python'] });
    expect(await findInterpreter(inp)).toEqual({ path: '/ws/b/.venv/bin/python', source: 'workspace venv' });
    expect(log.lines).toEqual([
      'info Interpreter: asap.python is not set',
      'info Interpreter: no venv at /ws/a/.venv/bin/python',
      'info Interpreter: using /ws/b/.venv/bin/python, the venv of workspace folder /ws/b',
    ]);
  });

  it('falls back to the venv of the ASAP checkout next to the extension', async () => {
    const { inp, pythonExtensionInterpreter } = inputs({ files: ['/src/asap/.venv/bin/python'] });
    expect(await findInterpreter(inp)).toEqual({ path: '/src/asap/.venv/bin/python', source: 'ASAP checkout venv' });
    expect(pythonExtensionInterpreter).not.toHaveBeenCalled();
  });

  it('looks for Scripts\\python.exe on Windows', async () => {
    const { inp } = inputs({ platform: 'win32', workspaceFolders: ['C:\\ws'], files: ['C:\\ws\\.venv\\Scripts\\python.exe'] });
    expect((await findInterpreter(inp))?.path).toBe('C:\\ws\\.venv\\Scripts\\python.exe');
  });

  it("then asks the Python extension for its active interpreter", async () => {
    const { inp, log } = inputs({ pythonExtensionInterpreter: async () => '/home/u/.pyenv/versions/3.12/bin/python' });
    expect(await findInterpreter(inp)).toEqual({ path: '/home/u/.pyenv/versions/3.12/bin/python', source: 'Python extension' });
    expect(log.lines.at(-1)).toBe(
      "info Interpreter: using /home/u/.pyenv/versions/3.12/bin/python, the Python extension's active interpreter",
    );
  });

  it('returns nothing and logs an error with the fix when every step fails', async () => {
    const { inp, log } = inputs({
      pythonExtensionInterpreter: async () => {
        throw new Error('activation failed');
      },
    });
    expect(await findInterpreter(inp)).toBeUndefined();
    expect(log.lines).toContain('warn Interpreter: asking the Python extension failed: Error: activation failed');
    expect(log.lines.at(-1)).toMatch(/^error Interpreter: none found\. Set asap\.python/);
    // Every step is visible in the log: setting, two folders, checkout, extension.
    expect(log.lines).toHaveLength(6);
  });
});

describe('interpreterCandidates', () => {
  async function all(inp: DiscoveryInputs) {
    const out = [];
    for await (const c of interpreterCandidates(inp)) out.push(c);
    return out;
  }

  it('yields every candidate in order, the Install Server venv after the checkout and before the Python extension', async () => {
    const { inp, log } = inputs({
      installedVenv: '/home/u/.vscode/globalStorage/asap-dev.asap/server-venv',
      files: ['/ws/a/.venv/bin/python', '/src/asap/.venv/bin/python', '/home/u/.vscode/globalStorage/asap-dev.asap/server-venv/bin/python'],
      pythonExtensionInterpreter: async () => '/usr/bin/python3',
    });
    expect((await all(inp)).map((c) => c.source)).toEqual([
      'workspace venv',
      'ASAP checkout venv',
      'installed server',
      'Python extension',
    ]);
    // all passed over: the error says what to do
    expect(log.lines.at(-1)).toMatch(/^error Interpreter: none found\. .* or run ASAP: Install Server/);
  });

  it('stops after an asap.python setting: it is the user\'s choice', async () => {
    const { inp, pythonExtensionInterpreter } = inputs({ setting: '/opt/py', files: ['/ws/a/.venv/bin/python'] });
    expect(await all(inp)).toEqual([{ path: '/opt/py', source: 'setting' }]);
    expect(pythonExtensionInterpreter).not.toHaveBeenCalled();
  });

  it('says where the server venv would be when it is not there', async () => {
    const { inp, log } = inputs({ installedVenv: '/g/server-venv' });
    expect(await all(inp)).toEqual([]);
    expect(log.lines).toContain('info Interpreter: no server venv at /g/server-venv/bin/python (ASAP: Install Server makes it)');
  });
});

describe('substituteVariables', () => {
  it('replaces every occurrence and ${userHome}', () => {
    expect(substituteVariables('${workspaceFolder}/a:${workspaceFolder}/b', ['/w'])).toBe('/w/a:/w/b');
    expect(substituteVariables('${userHome}/venv/bin/python', [], '/home/me')).toBe('/home/me/venv/bin/python');
  });

  it('leaves unknown variables and a folder-less ${workspaceFolder} untouched', () => {
    expect(substituteVariables('${env:HOME}/${workspaceFolder}', [])).toBe('${env:HOME}/${workspaceFolder}');
  });
});

describe('venvPython', () => {
  it('uses the platform layout', () => {
    expect(venvPython('/r', 'linux')).toBe('/r/.venv/bin/python');
    expect(venvPython('/r', 'darwin')).toBe('/r/.venv/bin/python');
    expect(venvPython('C:\\r', 'win32')).toBe('C:\\r\\.venv\\Scripts\\python.exe');
  });
});

describe('findInterpreter in an untrusted workspace (Restricted Mode)', () => {
  it("never runs the workspace's .venv: the ASAP checkout's, then the Python extension's", async () => {
    const { inp, log } = inputs({ trusted: false, files: ['/ws/a/.venv/bin/python', '/src/asap/.venv/bin/python'] });
    expect(await findInterpreter(inp)).toEqual({ path: '/src/asap/.venv/bin/python', source: 'ASAP checkout venv' });
    expect(log.lines).toContain("info Interpreter: the workspace is not trusted; not looking for its .venv");
    expect(log.lines.join('\n')).not.toContain('/ws/a/.venv');
    // the same files, trusted: the workspace's venv
    const trusted = inputs({ trusted: true, files: ['/ws/a/.venv/bin/python', '/src/asap/.venv/bin/python'] });
    expect((await findInterpreter(trusted.inp))?.source).toBe('workspace venv');
  });

  it('skips an asap.python inside the workspace, and the Python extension choosing the workspace venv', async () => {
    const inWs = inputs({
      trusted: false,
      setting: '${workspaceFolder}/.venv/bin/python',
      pythonExtensionInterpreter: async () => '/ws/b/.venv/bin/python',
    });
    expect(await findInterpreter(inWs.inp)).toBeUndefined();
    expect(inWs.log.lines).toContain(
      'info Interpreter: skipping /ws/a/.venv/bin/python (asap.python): it is inside the workspace, which is not trusted',
    );
    expect(inWs.log.lines).toContain(
      "info Interpreter: skipping /ws/b/.venv/bin/python (the Python extension's active interpreter): it is inside the workspace, which is not trusted",
    );
    const relative = inputs({ trusted: false, setting: 'env/bin/python' });
    expect(await findInterpreter(relative.inp)).toBeUndefined();
    // a user-level interpreter outside the workspace is used as in a trusted one
    const outside = inputs({ trusted: false, setting: '/opt/py/bin/python3' });
    expect(await findInterpreter(outside.inp)).toEqual({ path: '/opt/py/bin/python3', source: 'setting' });
  });

  it('an ASAP checkout that is the workspace itself (the extension run from it) is not trusted either', async () => {
    const { inp } = inputs({ trusted: false, workspaceFolders: ['/src/asap'], files: ['/src/asap/.venv/bin/python'] });
    expect(await findInterpreter(inp)).toBeUndefined();
  });
});
