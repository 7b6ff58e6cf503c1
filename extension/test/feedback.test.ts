import { beforeEach, describe, expect, it, vi } from 'vitest';

const vscode = vi.hoisted(() => ({
  window: {
    activeTextEditor: undefined as unknown,
    showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
    showInformationMessage: vi.fn((..._args: unknown[]) => Promise.resolve(undefined as string | undefined)),
  },
  commands: { executeCommand: vi.fn() },
}));
vi.mock('vscode', () => vscode);

import { analysisSummary, analyzeActive, meshLine } from '../src/analyze';
import { CLIENT_COMMANDS, SERVER_COMMANDS } from '../src/contract';
import { clientChannel, parseClientLine, userMessage } from '../src/log';
import { memoryLogger } from './helpers';

const REPORT = {
  diagnosis: { bottleneck: 'communication', confidence: 0.87 },
  proposals: [
    { rank: 1, keep_current: false, ici: { fsdp: 256, tensor: 1 }, dcn: {}, other_changes: {}, confidence: 0.69,
      expected: { speedup: 2.16, mfu: 0.41 } },
    { rank: 2, keep_current: false, ici: { fsdp: 128, tensor: 2 }, dcn: {}, other_changes: { remat_policy: 'full' },
      confidence: 0.5, expected: { speedup: 1.5, mfu: 0.3 } },
  ],
  nothing_fits: null,
};

describe('ASAP: Analyze says what it found when it finishes', () => {
  beforeEach(() => {
    vscode.window.showInformationMessage.mockClear();
    vscode.commands.executeCommand.mockClear();
  });

  it('summarises the diagnosis and proposal 1 with labelled numbers', () => {
    const s = analysisSummary(REPORT);
    expect(s.text).toBe(
      'communication-bound (confidence 87%). Proposal 1: fsdp=256 (expected x2.16, confidence 69%); 1 more as quick fixes.',
    );
    expect(s.proposals).toBe(2);
    const keep = analysisSummary({ diagnosis: { bottleneck: 'compute', confidence: 0.5 }, proposals: [{ keep_current: true }] });
    expect(keep).toEqual({ text: 'compute-bound (confidence 50%); no clearly better mesh: keep this one.', proposals: 0 });
    const none = analysisSummary({
      diagnosis: { bottleneck: 'memory', confidence: 0.8 },
      proposals: [],
      nothing_fits: { summary: 'no mesh of v5e-16 fits' },
    });
    expect(none.text).toBe('memory-bound (confidence 80%). no mesh of v5e-16 fits.');
    expect(analysisSummary(null).text).toContain('no diagnosis');
  });

  it('waits for the analysis, publishes it, then shows the summary with a way to the proposals', async () => {
    const text = '# c\nmodel_name: x\nici_fsdp_parallelism: 4\n';
    vscode.window.activeTextEditor = {
      document: { languageId: 'yaml', uri: { toString: () => 'file:///c.yml', fsPath: '/c.yml' }, getText: () => text },
    };
    vscode.window.showInformationMessage.mockResolvedValueOnce('Show Proposals');
    const run = vi.fn(async (command: string) => (command === SERVER_COMMANDS.analyze ? REPORT : null));
    const log = memoryLogger();
    expect(await analyzeActive(run, log)).toBe(true);
    expect(run.mock.calls.map((c) => c[0])).toEqual([SERVER_COMMANDS.analyze, SERVER_COMMANDS.runAgents]);
    expect(vscode.window.showInformationMessage).toHaveBeenCalledWith(
      expect.stringMatching(/^ASAP: communication-bound \(confidence 87%\)\. Proposal 1: fsdp=256/),
      'Show Proposals',
    );
    await vi.waitFor(() =>
      expect(vscode.commands.executeCommand).toHaveBeenCalledWith(CLIENT_COMMANDS.showProposals, 'file:///c.yml', 2, 0),
    );
    expect(log.lines.at(-1)).toMatch(/^info analysis of \/c\.yml: communication-bound/);
  });

  it('finds the mesh block line', () => {
    expect(meshLine('a: 1\r\nb: 2\r\ndcn_data_parallelism: 2\n')).toBe(2);
    expect(meshLine('a: 1\n')).toBe(0);
  });
});

describe('errors as short messages', () => {
  it('drops the exception class and any traceback', () => {
    expect(userMessage(new Error('ValueError: no profiles in /ws/empty: expected *.xplane.pb files'))).toBe(
      'no profiles in /ws/empty: expected *.xplane.pb files',
    );
    expect(userMessage(new Error('server.profiles.profile.ProfileError: bad\nTraceback (most recent call last):\n  x'))).toBe('bad');
    expect(userMessage('plain words')).toBe('plain words');
  });
});

describe("the language client's channel: one format, no blank lines", () => {
  function sink() {
    const lines: string[] = [];
    const at = (level: string) => (m: string) => lines.push(`${level} ${m}`);
    return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  }

  it("strips the client's own prefix and keeps the level", () => {
    expect(parseClientLine('[Info  - 10:11:12 PM] ASAP language server 0.1.0 started')).toEqual({
      level: 'info',
      message: 'ASAP language server 0.1.0 started',
    });
    expect(parseClientLine('[Error - 9:00:01 AM] boom').level).toBe('error');
    expect(parseClientLine('plain')).toEqual({ level: 'info', message: 'plain' });
    expect(parseClientLine("[Trace - 1:00:00 PM] Sending request 'textDocument/hover - (3)'.").level).toBe('info');
  });

  it('splits stderr chunks into lines, drops blank ones and redacts', () => {
    const s = sink();
    const ch = clientChannel(s);
    ch.appendLine('[Warn  - 1:02:03 PM] careful');
    ch.append('first line\n\nsecond ');
    ch.append('half with sk-ant-api03-SECRET\n\n');
    ch.appendLine('');
    ch.appendLine('[Info  - 1:02:04 PM] ');
    expect(s.lines).toEqual(['warn careful', 'info first line', 'info second half with sk-ant-***']);
  });
});
