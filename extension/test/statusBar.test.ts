import { beforeEach, describe, expect, it, vi } from 'vitest';

const state = vi.hoisted(() => ({ diagnostics: [] as unknown[], listeners: [] as (() => void)[] }));
const vscode = vi.hoisted(() => {
  const item = { text: '', tooltip: '', show: vi.fn(), dispose: vi.fn(), name: '', command: '' };
  return {
    item,
    StatusBarAlignment: { Left: 1 },
    window: {
      createStatusBarItem: vi.fn(() => item),
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

import { AsapStatus, menuItems, verdictText } from '../src/statusBar';

const diag = (code: string, message: string) => ({ code, message });

describe('status bar', () => {
  beforeEach(() => {
    state.diagnostics = [];
  });

  it("reads the agents' verdict from the ASAP300 diagnostic, and marks it stale", () => {
    expect(verdictText([diag('ASAP300', 'communication-bound (estimate, confidence 59%): ...')] as never)).toBe(
      'communication-bound 59%',
    );
    expect(verdictText([diag('ASAP300', '[stale: edited] hbm-bound (profile, confidence 80%): x')] as never)).toBe(
      'hbm-bound 80% (stale)',
    );
    expect(verdictText([diag('ASAP101', 'communication-bound (estimate, confidence 59%)')] as never)).toBeUndefined();
  });

  it('shows the server state and follows diagnostics changes', () => {
    const status = new AsapStatus();
    expect(vscode.item.text).toContain('ASAP');
    status.setState('running');
    expect(vscode.item.text).toBe('$(pulse) ASAP');
    state.diagnostics = [diag('ASAP300', 'compute-bound (estimate, confidence 70%): fine')];
    for (const cb of state.listeners) cb();
    expect(vscode.item.text).toBe('$(pulse) ASAP: compute-bound 70%');
    status.setState('failed');
    expect(vscode.item.text.startsWith('$(error) ASAP')).toBe(true);
  });

  it('opens a menu of actions: config actions while running, the restart first when the server failed', () => {
    const running = menuItems('running', true).map((i) => i.command);
    expect(running.slice(0, 4)).toEqual(['asap.analyze', 'asap.verify', 'asap.showRoofline', 'asap.linkProfile']);
    expect(running).toContain('asap.showOutput');
    expect(menuItems('running', false).map((i) => i.command)).not.toContain('asap.analyze');
    const failed = menuItems('failed', true).map((i) => i.command);
    expect(failed[0]).toBe('asap.restartServer');
    expect(failed).not.toContain('asap.analyze');
    new AsapStatus();
    expect(vscode.item.command).toBe('asap.statusMenu');
  });
});
