/** The server's long jobs (TPU compiles, the agents' analysis, profile conversion) as cancellable notifications.
 *
 * vscode-languageclient shows every server work-done progress in the status bar (ProgressLocation.Window), where
 * cancelling means clicking its text. `ProgressNotifications.middleware` is the client's `handleWorkDoneProgress`
 * middleware: for the ASAP server's tokens ("asap-...") it shows a notification instead, with the server's step,
 * its percentage and the time elapsed, and a Cancel button that sends window/workDoneProgress/cancel. `begin` and
 * `report` are not passed on, so the client's own status-bar part never shows; `end` is, so that part is disposed.
 * A job shows once it has run for `delayMs` (the agents on a save often answer in well under a second: no
 * notification flashes for them).
 */
import * as vscode from 'vscode';
import type {
  HandleWorkDoneProgressSignature,
  ProgressToken,
  WorkDoneProgressBegin,
  WorkDoneProgressEnd,
  WorkDoneProgressReport,
} from 'vscode-languageclient';

type Params = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

/** Tokens the ASAP server creates (server/editor/progress.py `_begin`). */
export function isAsapToken(token: ProgressToken): boolean {
  return typeof token === 'string' && token.startsWith('asap-');
}

/** "42 s", "3 min 05 s": the time since a job began. */
export function formatElapsed(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}

/** The notification's message: the server's step, then the time elapsed (labelled). */
export function progressMessage(step: string | undefined, elapsedMs: number): string {
  const elapsed = `elapsed ${formatElapsed(elapsedMs)}`;
  return step ? `${step} · ${elapsed}` : elapsed;
}

interface Job {
  started: number;
  step: string | undefined;
  percentage: number | undefined; // the server's latest
  reported: number; // percentage already given to VS Code (its increments add up)
  delay?: ReturnType<typeof setTimeout>;
  progress?: vscode.Progress<{ message?: string; increment?: number }>;
  finish?: () => void;
  ended: boolean;
  timer?: ReturnType<typeof setInterval>;
  cancelListener?: vscode.Disposable;
}

export class ProgressNotifications implements vscode.Disposable {
  private readonly jobs = new Map<ProgressToken, Job>();

  /** `sendCancel` sends window/workDoneProgress/cancel for a token; `now`, `tickMs` and `delayMs` are for tests. */
  constructor(
    private readonly sendCancel: (token: ProgressToken) => void,
    private readonly now: () => number = () => Date.now(),
    private readonly tickMs = 1000,
    private readonly delayMs = 1000,
  ) {}

  /** The language client's `middleware.handleWorkDoneProgress`. */
  readonly middleware = (token: ProgressToken, params: Params, next: HandleWorkDoneProgressSignature): void => {
    if (!isAsapToken(token)) {
      next(token, params);
      return;
    }
    switch (params.kind) {
      case 'begin':
        this.begin(token, params);
        return;
      case 'report':
        this.report(token, params);
        return;
      case 'end':
        this.end(token);
        next(token, params); // the client's own (never shown) part disposes its handler
        return;
    }
  };

  /** Jobs still shown (tests, and the count the e2e can read). */
  get active(): number {
    return this.jobs.size;
  }

  /** Close every notification: the server stopped, and its jobs with it. */
  dispose(): void {
    for (const token of [...this.jobs.keys()]) this.end(token);
  }

  private begin(token: ProgressToken, params: WorkDoneProgressBegin): void {
    if (this.jobs.has(token)) return;
    const job: Job = {
      started: this.now(),
      step: params.message,
      percentage: params.percentage,
      reported: 0,
      ended: false,
    };
    this.jobs.set(token, job);
    job.delay = setTimeout(() => this.notify(token, job, params), this.delayMs);
  }

  private notify(token: ProgressToken, job: Job, params: WorkDoneProgressBegin): void {
    job.delay = undefined;
    if (job.ended) return;
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: params.title, cancellable: params.cancellable === true },
      (progress, cancellation) =>
        new Promise<void>((resolve) => {
          if (job.ended) {
            resolve();
            return;
          }
          job.progress = progress;
          job.finish = resolve;
          job.cancelListener = cancellation.onCancellationRequested(() => {
            this.sendCancel(token);
            // The server ends its progress once the job stops; the notification closes now, as the user asked.
            this.end(token);
          });
          this.show(job);
          job.timer = setInterval(() => this.show(job), this.tickMs);
        }),
    );
  }

  private report(token: ProgressToken, params: WorkDoneProgressReport): void {
    const job = this.jobs.get(token);
    if (!job) return;
    if (params.message !== undefined) job.step = params.message;
    if (typeof params.percentage === 'number') job.percentage = params.percentage;
    this.show(job);
  }

  private show(job: Job): void {
    if (!job.progress) return;
    let increment: number | undefined;
    if (typeof job.percentage === 'number') {
      const pct = Math.max(0, Math.min(100, job.percentage));
      if (pct > job.reported) {
        increment = pct - job.reported;
        job.reported = pct;
      }
    }
    const message = progressMessage(job.step, this.now() - job.started);
    job.progress.report(increment === undefined ? { message } : { message, increment });
  }

  private end(token: ProgressToken): void {
    const job = this.jobs.get(token);
    if (!job) return;
    this.jobs.delete(token);
    job.ended = true;
    if (job.delay !== undefined) clearTimeout(job.delay);
    if (job.timer !== undefined) clearInterval(job.timer);
    job.cancelListener?.dispose();
    job.finish?.();
  }
}
