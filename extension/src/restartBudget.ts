/** Caps automatic restarts of a crashing server: at most `max` in any `windowMs`, then stop and tell the user. */
import { CloseAction, ErrorAction, type ErrorHandler } from 'vscode-languageclient/node';

import type { Logger } from './log';

export class RestartBudget {
  private crashes: number[] = [];

  constructor(
    readonly max = 4,
    readonly windowMs = 3 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Record a crash; true when another restart is allowed. */
  allow(): boolean {
    const t = this.now();
    this.crashes = this.crashes.filter((c) => t - c < this.windowMs);
    this.crashes.push(t);
    return this.crashes.length <= this.max;
  }

  reset(): void {
    this.crashes = [];
  }
}

export function cappedErrorHandler(budget: RestartBudget, log: Logger, onGiveUp: (message: string) => void): ErrorHandler {
  return {
    // Transport errors: keep the connection unless they pile up; a real crash arrives as closed().
    error: (error, _message, count) => {
      log.error(`Connection error (${count ?? 1}): ${error.message}`);
      return { action: (count ?? 1) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: true };
    },
    closed: () => {
      if (budget.allow()) {
        log.warn('The ASAP server stopped; restarting it');
        return { action: CloseAction.Restart, handled: true };
      }
      const message =
        `The ASAP server stopped ${budget.max + 1} times in ${budget.windowMs / 60_000} minutes and will not be restarted. ` +
        'See the ASAP output, then run "ASAP: Restart Language Server".';
      log.error(message);
      onGiveUp(message);
      return { action: CloseAction.DoNotRestart, handled: true };
    },
  };
}
