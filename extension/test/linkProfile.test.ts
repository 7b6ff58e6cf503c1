import { beforeEach, describe, expect, it, vi } from 'vitest';

const vscode = vi.hoisted(() => ({
  window: {
    activeTextEditor: undefined as unknown,
    showOpenDialog: vi.fn(),
    showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
  },
}));
vi.mock('vscode', () => vscode);

import { SERVER_COMMANDS } from '../src/contract';
import { linkProfile, unlinkProfile } from '../src/linkProfile';
import { memoryLogger } from './helpers';

function editor(scheme: string, languageId: string, fsPath = '/ws/configs/a.yml') {
  return { document: { uri: { scheme, fsPath, toString: () => `${scheme}://${fsPath}` }, languageId } };
}

describe('linkProfile', () => {
  beforeEach(() => {
    vscode.window.showOpenDialog.mockReset();
    vscode.window.showErrorMessage.mockClear();
  });

  it('sends the active config and the picked path to the server', async () => {
    vscode.window.activeTextEditor = editor('file', 'yaml');
    vscode.window.showOpenDialog.mockResolvedValue([{ fsPath: '/ws/runs/r1' }]);
    const run = vi.fn(async () => ({ links_file: '/ws/.asap/links.json' }));
    const log = memoryLogger();
    expect(await linkProfile(run, log)).toBe(true);
    expect(run).toHaveBeenCalledWith(SERVER_COMMANDS.linkProfile, ['file:///ws/configs/a.yml', '/ws/runs/r1']);
    const opts = vscode.window.showOpenDialog.mock.calls[0][0];
    expect(opts).toMatchObject({ canSelectFiles: true, canSelectFolders: true, canSelectMany: false });
    expect(log.lines.some((l) => l.includes('linked /ws/configs/a.yml to profile /ws/runs/r1'))).toBe(true);
  });

  it('does nothing when the dialog is dismissed', async () => {
    vscode.window.activeTextEditor = editor('file', 'yaml');
    vscode.window.showOpenDialog.mockResolvedValue(undefined);
    const run = vi.fn();
    expect(await linkProfile(run, memoryLogger())).toBe(false);
    expect(run).not.toHaveBeenCalled();
  });

  it('refuses unsaved or non-YAML documents without asking for a path', async () => {
    for (const ed of [editor('untitled', 'yaml'), editor('file', 'python'), undefined]) {
      vscode.window.activeTextEditor = ed;
      const run = vi.fn();
      expect(await linkProfile(run, memoryLogger())).toBe(false);
      expect(vscode.window.showOpenDialog).not.toHaveBeenCalled();
      expect(run).not.toHaveBeenCalled();
    }
    expect(vscode.window.showErrorMessage).toHaveBeenCalledTimes(3);
  });

  it("shows the server's refusal (e.g. no profiles in the folder) as an error", async () => {
    vscode.window.activeTextEditor = editor('file', 'yaml');
    vscode.window.showOpenDialog.mockResolvedValue([{ fsPath: '/ws/empty' }]);
    const run = vi.fn(async () => {
      throw new Error('no profiles in /ws/empty');
    });
    const log = memoryLogger();
    expect(await linkProfile(run, log)).toBe(false);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith('ASAP: no profiles in /ws/empty');
    expect(log.lines).toContain('error profile link failed: no profiles in /ws/empty');
  });

  it('unlinks with a null path', async () => {
    vscode.window.activeTextEditor = editor('file', 'yaml');
    const run = vi.fn(async () => ({}));
    expect(await unlinkProfile(run, memoryLogger())).toBe(true);
    expect(run).toHaveBeenCalledWith(SERVER_COMMANDS.linkProfile, ['file:///ws/configs/a.yml', null]);
  });
});
