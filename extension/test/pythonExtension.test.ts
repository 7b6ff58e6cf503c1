import { beforeEach, describe, expect, it, vi } from 'vitest';

const getExtension = vi.hoisted(() => vi.fn());
vi.mock('vscode', () => ({ extensions: { getExtension } }));

import { pythonExtensionInterpreter } from '../src/pythonExtension';

function pythonApi(executable: string | undefined) {
  const resolveEnvironment = vi.fn(async (_env: unknown) =>
    executable === undefined ? undefined : { executable: { uri: { fsPath: executable } } },
  );
  return {
    resolveEnvironment,
    api: { environments: { getActiveEnvironmentPath: () => ({ path: '/envs/proj' }), resolveEnvironment } },
  };
}

beforeEach(() => getExtension.mockReset());

describe('pythonExtensionInterpreter', () => {
  it('activates ms-python.python and resolves the active environment to its executable', async () => {
    const { api, resolveEnvironment } = pythonApi('/envs/proj/bin/python');
    const activate = vi.fn(async () => api);
    getExtension.mockReturnValue({ isActive: false, activate });

    expect(await pythonExtensionInterpreter()).toBe('/envs/proj/bin/python');
    expect(getExtension).toHaveBeenCalledWith('ms-python.python');
    expect(activate).toHaveBeenCalledOnce();
    expect(resolveEnvironment).toHaveBeenCalledWith({ path: '/envs/proj' });
  });

  it('uses the exports of an already active extension', async () => {
    const { api } = pythonApi('/usr/bin/python3');
    const activate = vi.fn();
    getExtension.mockReturnValue({ isActive: true, exports: api, activate });
    expect(await pythonExtensionInterpreter()).toBe('/usr/bin/python3');
    expect(activate).not.toHaveBeenCalled();
  });

  it('is undefined without the extension or when the environment does not resolve', async () => {
    getExtension.mockReturnValue(undefined);
    expect(await pythonExtensionInterpreter()).toBeUndefined();
    getExtension.mockReturnValue({ isActive: true, exports: pythonApi(undefined).api });
    expect(await pythonExtensionInterpreter()).toBeUndefined();
  });
});
