import { describe, expect, it, vi } from 'vitest';

const vscode = vi.hoisted(() => ({
  window: {
    activeTextEditor: undefined as unknown,
    showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
    showInformationMessage: vi.fn(() => Promise.resolve(undefined)),
  },
  commands: { executeCommand: vi.fn() },
}));
vi.mock('vscode', () => vscode);

import { analyzeActive, verifyActive } from '../src/analyze';
import { SERVER_COMMANDS } from '../src/contract';
import { memoryLogger } from './helpers';

describe('ASAP: Analyze', () => {
  it('asks the server to run the agents on the active config', async () => {
    vscode.window.activeTextEditor = {
      document: { languageId: 'yaml', uri: { toString: () => 'file:///c.yml', fsPath: '/c.yml' } },
    };
    const run = vi.fn(async () => null);
    expect(await analyzeActive(run, memoryLogger())).toBe(true);
    expect(run).toHaveBeenCalledWith(SERVER_COMMANDS.runAgents, ['file:///c.yml']);
  });

  it('refuses other documents and reports a server failure', async () => {
    vscode.window.activeTextEditor = { document: { languageId: 'python', uri: {} } };
    const run = vi.fn();
    expect(await analyzeActive(run, memoryLogger())).toBe(false);
    expect(run).not.toHaveBeenCalled();
    vscode.window.activeTextEditor = {
      document: { languageId: 'yaml', uri: { toString: () => 'file:///c.yml', fsPath: '/c.yml' } },
    };
    const log = memoryLogger();
    expect(await analyzeActive(vi.fn(async () => Promise.reject(new Error('server stopped'))), log)).toBe(false);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith('ASAP: analysis failed: server stopped');
  });

  it('asks the server to verify the active config with the TPU compiler', async () => {
    vscode.window.activeTextEditor = {
      document: { languageId: 'yaml', uri: { toString: () => 'file:///c.yml', fsPath: '/c.yml' } },
    };
    const run = vi.fn(async () => null);
    const log = memoryLogger();
    expect(await verifyActive(run, log)).toBe(true);
    expect(run).toHaveBeenCalledWith(SERVER_COMMANDS.verify, ['file:///c.yml']);
    expect(log.lines.at(-1)).toContain('ASAP400/401');
    vscode.window.activeTextEditor = { document: { languageId: 'json', uri: {} } };
    expect(await verifyActive(run, log)).toBe(false);
    expect(run).toHaveBeenCalledTimes(1);
  });
});
