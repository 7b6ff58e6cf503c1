import { describe, expect, it, vi } from 'vitest';

const vscode = vi.hoisted(() => ({
  window: {
    activeTextEditor: undefined as unknown,
    showErrorMessage: vi.fn(() => Promise.resolve(undefined)),
    showInformationMessage: vi.fn(() => Promise.resolve(undefined)),
    showOpenDialog: vi.fn(async () => [{ fsPath: '/runs/after' }] as unknown[] | undefined),
  },
}));
vi.mock('vscode', () => vscode);

import { ResponseError } from 'vscode-jsonrpc';

import { COMMAND_ERROR, ERROR_CODES, SERVER_COMMANDS } from '../src/contract';
import { outcomeText, recordOutcome } from '../src/outcome';
import { memoryLogger } from './helpers';

const OUT = {
  rank: 1,
  predicted_step_s: 0.0127,
  measured_step_s: 0.01,
  predicted_speedup: 1.58,
  measured_speedup: 1.0,
  bottleneck_before: 'communication',
  bottleneck_after: 'compute',
};
const editor = { document: { languageId: 'yaml', uri: { toString: () => 'file:///c.yml' } } };

describe('ASAP: Record Outcome', () => {
  it('says what the proposal did against the prediction', () => {
    expect(outcomeText(OUT)).toBe(
      'ASAP: outcome of proposal 1 recorded: measured x1.00 against the predicted x1.58; bottleneck communication -> compute',
    );
    expect(outcomeText({ ...OUT, measured_speedup: null })).toContain('step 10.0 ms against the predicted 12.7 ms');
  });

  it("uses the linked profile, and asks for one when the config has none", async () => {
    vscode.window.activeTextEditor = editor;
    const run = vi.fn(async () => OUT);
    expect(await recordOutcome(run, memoryLogger())).toBe(true);
    expect(run).toHaveBeenCalledWith(SERVER_COMMANDS.recordOutcome, ['file:///c.yml', null]);
    expect(vscode.window.showInformationMessage).toHaveBeenCalledWith(outcomeText(OUT));

    const asks = vi.fn(async (_c: string, args: unknown[]) => {
      // What vscode-languageclient rejects with for the server's CommandError (server/editor/contract.py)
      if (args[1] === null) throw new ResponseError(COMMAND_ERROR, 'none linked', { code: ERROR_CODES.noProfileLinked });
      return OUT;
    });
    expect(await recordOutcome(asks, memoryLogger())).toBe(true);
    expect(asks).toHaveBeenLastCalledWith(SERVER_COMMANDS.recordOutcome, ['file:///c.yml', '/runs/after']);
  });

  it('asks for a profile on the error code, never on the message', async () => {
    vscode.window.activeTextEditor = editor;
    vscode.window.showOpenDialog.mockClear();
    const other = vi.fn(async () => {
      throw new ResponseError(COMMAND_ERROR, 'no profile is linked (but the code says otherwise)', {
        code: ERROR_CODES.badProfile,
      });
    });
    expect(await recordOutcome(other, memoryLogger())).toBe(false);
    expect(vscode.window.showOpenDialog).not.toHaveBeenCalled();
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith('ASAP: no profile is linked (but the code says otherwise)');
  });

  it("shows the server's reason when the profile is not a run of the proposal", async () => {
    vscode.window.activeTextEditor = editor;
    const run = vi.fn(async () => Promise.reject(new Error('the profile is of another run: 8 devices')));
    const log = memoryLogger();
    expect(await recordOutcome(run, log)).toBe(false);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith('ASAP: the profile is of another run: 8 devices');
    expect(log.lines.at(-1)).toContain('outcome not recorded');
  });
});
