import { beforeEach, describe, expect, it, vi } from 'vitest';

const vscode = vi.hoisted(() => ({
  window: {
    activeTextEditor: undefined as unknown,
    showOpenDialog: vi.fn(),
    showQuickPick: vi.fn(),
    showInputBox: vi.fn(),
    showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
    withProgress: vi.fn((_o: unknown, task: () => Promise<unknown>) => task()),
  },
  ProgressLocation: { Notification: 15 },
}));
vi.mock('vscode', () => vscode);

import { SERVER_COMMANDS } from '../src/contract';
import { gcsUrlProblem, linkProfile, unlinkProfile } from '../src/linkProfile';
import { memoryLogger } from './helpers';

function editor(scheme: string, languageId: string, fsPath = '/ws/configs/a.yml') {
  return { document: { uri: { scheme, fsPath, toString: () => `${scheme}://${fsPath}` }, languageId } };
}

describe('linkProfile', () => {
  beforeEach(() => {
    vscode.window.showOpenDialog.mockReset();
    vscode.window.showInputBox.mockReset();
    vscode.window.showErrorMessage.mockClear();
    vscode.window.withProgress.mockClear();
    // a file or folder on this machine, unless a test types a gs:// URL
    vscode.window.showQuickPick.mockReset();
    vscode.window.showQuickPick.mockImplementation(async (items: { label: string }[]) => items[0]);
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

  it('links a typed gs:// URL as it is, checked by the server under a progress notification', async () => {
    vscode.window.activeTextEditor = editor('file', 'yaml');
    vscode.window.showQuickPick.mockImplementation(async (items: { label: string }[]) => items[1]);
    vscode.window.showInputBox.mockResolvedValue(' gs://team-runs/llama-fsdp4 ');
    const run = vi.fn(async () => ({ links_file: '/ws/.asap/links.json', profile: 'gs://team-runs/llama-fsdp4' }));
    const log = memoryLogger();
    expect(await linkProfile(run, log)).toBe(true);
    const items = vscode.window.showQuickPick.mock.calls[0][0] as { label: string }[];
    expect(items.map((i) => i.label)).toEqual(['Pick a file or folder...', 'Enter a gs:// URL...']);
    expect(run).toHaveBeenCalledWith(SERVER_COMMANDS.linkProfile, [
      'file:///ws/configs/a.yml',
      'gs://team-runs/llama-fsdp4',
    ]);
    expect(vscode.window.showOpenDialog).not.toHaveBeenCalled();
    expect(vscode.window.withProgress.mock.calls[0][0]).toMatchObject({
      title: 'ASAP: looking for a profile under gs://team-runs/llama-fsdp4',
    });
    expect(log.lines).toContain('info linked /ws/configs/a.yml to profile gs://team-runs/llama-fsdp4');
    // the input box refuses what is not a gs:// URL before the server is asked
    const validate = vscode.window.showInputBox.mock.calls[0][0].validateInput as (v: string) => string | undefined;
    expect(validate).toBe(gcsUrlProblem);
  });

  it("shows the server's refusal of a gs:// URL (a missing bucket) in its words", async () => {
    vscode.window.activeTextEditor = editor('file', 'yaml');
    vscode.window.showQuickPick.mockImplementation(async (items: { label: string }[]) => items[1]);
    vscode.window.showInputBox.mockResolvedValue('gs://no-such-bucket/run');
    const run = vi.fn(async () => {
      throw new Error("gs://no-such-bucket/run: bucket 'no-such-bucket' not found");
    });
    expect(await linkProfile(run, memoryLogger())).toBe(false);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(
      "ASAP: gs://no-such-bucket/run: bucket 'no-such-bucket' not found",
    );
  });

  it('checks a typed URL: gs:// with a bucket, no spaces', () => {
    expect(gcsUrlProblem('gs://b/run')).toBeUndefined();
    expect(gcsUrlProblem('  GS://bucket  ')).toBeUndefined();
    expect(gcsUrlProblem('/local/run')).toMatch(/^a Cloud Storage URL: gs:\/\//);
    expect(gcsUrlProblem('s3://b/run')).toMatch(/^a Cloud Storage URL/);
    expect(gcsUrlProblem('gs:///run')).toBe('the URL names no bucket: gs://<bucket>/<run_name>');
    expect(gcsUrlProblem('gs://b/my run')).toBe('a gs:// URL has no spaces');
  });

  it('does nothing when the choice, the URL or the dialog is dismissed', async () => {
    vscode.window.activeTextEditor = editor('file', 'yaml');
    const run = vi.fn();
    vscode.window.showQuickPick.mockResolvedValue(undefined);
    expect(await linkProfile(run, memoryLogger())).toBe(false);
    vscode.window.showQuickPick.mockImplementation(async (items: { label: string }[]) => items[1]);
    vscode.window.showInputBox.mockResolvedValue(undefined);
    expect(await linkProfile(run, memoryLogger())).toBe(false);
    expect(run).not.toHaveBeenCalled();
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
