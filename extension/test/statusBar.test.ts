import { beforeEach, describe, expect, it, vi } from 'vitest';

const state = vi.hoisted(() => ({ diagnostics: [] as unknown[], listeners: [] as (() => void)[] }));
const vscode = vi.hoisted(() => {
  const item = { text: '', tooltip: '', show: vi.fn(), dispose: vi.fn(), name: '', command: '' };
  const others: (typeof item)[] = []; // the items after the first (the Restricted Mode one)
  return {
    item,
    others,
    StatusBarAlignment: { Left: 1 },
    window: {
      createStatusBarItem: vi.fn((id: string) => {
        if (id === 'asap.status') return item;
        const made = { text: '', tooltip: '', show: vi.fn(), dispose: vi.fn(), name: '', command: '' };
        others.push(made);
        return made;
      }),
      activeTextEditor: { document: { uri: 'file:///c.yml' } } as unknown,
      onDidChangeActiveTextEditor: vi.fn(() => ({ dispose: vi.fn() })),
    },
    languages: {
      getDiagnostics: vi.fn(() => state.diagnostics),
      onDidChangeDiagnostics: vi.fn((cb: () => void) => {
        state.listeners.push(cb);
        return { dispose: vi.fn() };
      }),
    },
  };
});
vi.mock('vscode', () => vscode);

import { AsapStatus, lensStatus, MANAGE_TRUST, menuItems, RESTRICTED_TEXT, verdictText } from '../src/statusBar';

const diag = (code: string, message: string) => ({ code, message });

describe('status bar', () => {
  beforeEach(() => {
    state.diagnostics = [];
  });

  it("reads the agents' verdict from the ASAP300 diagnostic, labelled, and marks it stale", () => {
    expect(verdictText([diag('ASAP300', 'communication-bound (estimate, confidence 59%): ...')] as never)).toBe(
      'communication-bound (confidence 59%)',
    );
    expect(verdictText([diag('ASAP300', '[stale: edited] hbm-bound (profile, confidence 80%): x')] as never)).toBe(
      'hbm-bound (confidence 80%) (stale)',
    );
    expect(verdictText([diag('ASAP101', 'communication-bound (estimate, confidence 59%)')] as never)).toBeUndefined();
  });

  it('shows the server state and follows diagnostics changes', async () => {
    const status = new AsapStatus();
    expect(vscode.item.text).toContain('ASAP');
    status.setState('running');
    await status.render();
    expect(vscode.item.text).toBe('$(pulse) ASAP');
    state.diagnostics = [diag('ASAP300', 'compute-bound (estimate, confidence 70%): fine')];
    for (const cb of state.listeners) cb();
    await status.render();
    expect(vscode.item.text).toBe('$(pulse) ASAP: compute-bound (confidence 70%)');
    status.setState('failed');
    await status.render();
    expect(vscode.item.text.startsWith('$(error) ASAP')).toBe(true);
  });

  it("shortens the code lens' summary, every number labelled, the compiler's verdict in the tooltip", () => {
    const titles = [
      'ASAP: compute-bound · MFU 25% · 1 proposal fits (best ×1.30, confidence 60%) · 2 withdrawn: do not fit',
      'TPU compiler: fits, 20.6 of 31.25 GiB',
      'Roofline',
    ];
    const got = lensStatus(titles);
    expect(got?.text).toBe('compute-bound · 1 proposal fits · 2 withdrawn: do not fit');
    expect(got?.tooltip).toBe(`${titles[0]}\n${titles[1]}`);
    expect(lensStatus(['ASAP: compute-bound · MFU 25% · 3 proposals (best ×1.48, confidence 69%)'])?.text).toBe(
      'compute-bound · 3 proposals',
    );
    expect(lensStatus(['ASAP: compute-bound · MFU 25% · 3 proposals fit (TPU compiler; best ×1.48, confidence 69%)'])?.text).toBe(
      'compute-bound · 3 proposals fit (TPU compiler)',
    );
    expect(lensStatus(['ASAP: analysing…', 'Analyze'])).toBeUndefined();
    expect(lensStatus([])).toBeUndefined();
  });

  it("reads the config's code lens when the server runs, and never shows a bare percentage", async () => {
    const lenses = vi.fn(async () => [
      { command: { title: 'ASAP: hbm-bound · MFU 31% · keep this mesh (no clearly better one)' } },
      { command: { title: 'Verify' } },
    ]);
    const editor = vscode.window as { activeTextEditor: unknown };
    const before = editor.activeTextEditor;
    editor.activeTextEditor = { document: { uri: 'file:///c.yml', languageId: 'yaml' } };
    try {
      const status = new AsapStatus(lenses as never);
      status.setState('running');
      await status.render();
      expect(lenses).toHaveBeenCalled();
      expect(vscode.item.text).toBe('$(pulse) ASAP: hbm-bound · keep this mesh (no clearly better one)');
      expect(vscode.item.text).not.toMatch(/(^|[^\w ]) ?\d+%/);
      expect(vscode.item.tooltip).toContain('MFU 31%');
      const asked = lenses.mock.calls.length;
      const other = { toString: () => 'file:///other.yml' };
      for (const cb of state.listeners) (cb as (e: unknown) => void)({ uris: [other] });
      expect(lenses.mock.calls.length).toBe(asked); // another file's diagnostics: the lens is not asked again
    } finally {
      editor.activeTextEditor = before;
    }
  });

  it('opens a menu of actions: config actions while running, the restart first when the server failed', () => {
    const running = menuItems('running', true).map((i) => i.command);
    expect(running.slice(0, 4)).toEqual(['asap.analyze', 'asap.verify', 'asap.showRoofline', 'asap.linkProfile']);
    expect(running).toContain('asap.showOutput');
    expect(menuItems('running', false).map((i) => i.command)).not.toContain('asap.analyze');
    const failed = menuItems('failed', true).map((i) => i.command);
    expect(failed[0]).toBe('asap.restartServer');
    expect(failed).not.toContain('asap.analyze');
    // no server installed: Install Server first, no config action (no server to run it)
    const missing = menuItems('not installed', true).map((i) => i.command);
    expect(missing[0]).toBe('asap.installServer');
    expect(missing).not.toContain('asap.analyze');
    new AsapStatus();
    expect(vscode.item.command).toBe('asap.statusMenu');
  });

  it('says once, in an item of its own, what is off until the workspace is trusted', () => {
    vscode.others.length = 0;
    const status = new AsapStatus();
    expect(vscode.others).toHaveLength(0); // a trusted workspace: no such item
    status.setRestricted(true);
    status.setRestricted(true); // once
    expect(vscode.others).toHaveLength(1);
    const [item] = vscode.others;
    expect(item.text).toBe(RESTRICTED_TEXT);
    expect(item.text).toBe('$(shield) ASAP: restricted');
    for (const off of ['workspace interpreter', 'Verify', 'Claude']) expect(item.tooltip).toContain(off);
    expect(item.command).toBe(MANAGE_TRUST);
    expect(item.show).toHaveBeenCalledOnce();
    expect(status.restricted).toBe(true);
    status.setRestricted(false); // trust granted
    expect(item.dispose).toHaveBeenCalledOnce();
    expect(status.restricted).toBe(false);
    status.dispose();
    // the status menu offers no Verify while restricted (the server would refuse it), the other actions as before
    const commands = (restricted: boolean) => menuItems('running', true, restricted).map((m) => m.command);
    expect(commands(false)).toContain('asap.verify');
    expect(commands(true)).toEqual(commands(false).filter((c) => c !== 'asap.verify'));
  });
});
