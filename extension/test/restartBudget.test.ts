import { describe, expect, it, vi } from 'vitest';

// The real module needs the VS Code host; only the enums matter here.
vi.mock('vscode-languageclient/node', () => ({
  CloseAction: { DoNotRestart: 1, Restart: 2 },
  ErrorAction: { Continue: 1, Shutdown: 2 },
}));

import { CloseAction, ErrorAction } from 'vscode-languageclient/node';

import { cappedErrorHandler, RestartBudget } from '../src/restartBudget';
import { memoryLogger } from './helpers';

const MIN = 60_000;

describe('RestartBudget', () => {
  it('allows four restarts in three minutes, not a fifth', () => {
    let t = 0;
    const budget = new RestartBudget(4, 3 * MIN, () => t);
    const answers = [0, 1, 2, 3, 4].map((i) => ((t = i * 10_000), budget.allow()));
    expect(answers).toEqual([true, true, true, true, false]);
  });

  it('forgets crashes older than the window', () => {
    let t = 0;
    const budget = new RestartBudget(4, 3 * MIN, () => t);
    for (let i = 0; i < 4; i++) budget.allow();
    t = 3 * MIN; // the first four are exactly one window old
    expect(budget.allow()).toBe(true);
    t = 3 * MIN + 1;
    for (let i = 0; i < 3; i++) expect(budget.allow()).toBe(true);
    expect(budget.allow()).toBe(false);
  });

  it('starts afresh after reset (a manual restart)', () => {
    const budget = new RestartBudget(1, MIN, () => 0);
    budget.allow();
    expect(budget.allow()).toBe(false);
    budget.reset();
    expect(budget.allow()).toBe(true);
  });
});

describe('cappedErrorHandler', () => {
  it('restarts on close until the budget is spent, then stops and tells the user once', async () => {
    const log = memoryLogger();
    const onGiveUp = vi.fn();
    const handler = cappedErrorHandler(new RestartBudget(4, 3 * MIN, () => 0), log, onGiveUp);
    const actions = [];
    for (let i = 0; i < 5; i++) actions.push((await handler.closed()).action);
    expect(actions).toEqual([...Array(4).fill(CloseAction.Restart), CloseAction.DoNotRestart]);
    expect(onGiveUp).toHaveBeenCalledTimes(1);
    expect(onGiveUp.mock.calls[0][0]).toMatch(/stopped 5 times in 3 minutes.*ASAP: Restart Language Server/);
  });

  it('keeps the connection on a few transport errors and shuts down when they pile up', async () => {
    const handler = cappedErrorHandler(new RestartBudget(), memoryLogger(), vi.fn());
    const err = new Error('write EPIPE');
    expect((await handler.error(err, undefined, 1)).action).toBe(ErrorAction.Continue);
    expect((await handler.error(err, undefined, 3)).action).toBe(ErrorAction.Continue);
    expect((await handler.error(err, undefined, 4)).action).toBe(ErrorAction.Shutdown);
  });
});
