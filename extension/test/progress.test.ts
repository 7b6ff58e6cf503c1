import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

/** A fake of vscode.window.withProgress that records each notification: options, reports, cancel, closed. */
interface Shown {
  options: { location: number; title?: string; cancellable?: boolean };
  reports: { message?: string; increment?: number }[];
  cancel: () => void;
  closed: boolean;
}
const vscode = vi.hoisted(() => {
  const shown: Shown[] = [];
  return {
    shown,
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    window: {
      withProgress: (
        options: Shown['options'],
        task: (p: unknown, t: unknown) => Promise<void>,
      ): Promise<void> => {
        const entry: Shown = { options, reports: [], cancel: () => undefined, closed: false };
        const listeners: (() => void)[] = [];
        entry.cancel = () => listeners.forEach((f) => f());
        shown.push(entry);
        const done = task(
          { report: (v: { message?: string; increment?: number }) => entry.reports.push(v) },
          {
            onCancellationRequested: (f: () => void) => {
              listeners.push(f);
              return { dispose: () => listeners.splice(listeners.indexOf(f), 1) };
            },
          },
        );
        return done.then(() => {
          entry.closed = true;
        });
      },
    },
  };
});
vi.mock('vscode', () => vscode);

import { formatElapsed, isAsapToken, ProgressNotifications, progressMessage } from '../src/progress';

let clock = 0;
let cancelled: unknown[] = [];
let next: ReturnType<typeof vi.fn>;
let notes: ProgressNotifications;

beforeEach(() => {
  vi.useFakeTimers();
  clock = 0;
  cancelled = [];
  vscode.shown.length = 0;
  next = vi.fn();
  notes = new ProgressNotifications((t) => cancelled.push(t), () => clock, 1000, 500);
});
afterEach(() => {
  notes.dispose();
  vi.useRealTimers();
});

const flush = () => Promise.resolve().then(() => undefined);

describe('progress notifications', () => {
  it('labels the elapsed time', () => {
    expect(formatElapsed(0)).toBe('0 s');
    expect(formatElapsed(42_900)).toBe('42 s');
    expect(formatElapsed(185_000)).toBe('3 min 05 s');
    expect(progressMessage('compiled 2 layers (1 of 2 done)', 61_000)).toBe(
      'compiled 2 layers (1 of 2 done) · elapsed 1 min 01 s',
    );
    expect(progressMessage(undefined, 3000)).toBe('elapsed 3 s');
    expect(isAsapToken('asap-compiler-1-2.5')).toBe(true);
    expect(isAsapToken('other-1')).toBe(false);
    expect(isAsapToken(7)).toBe(false);
  });

  it("shows an ASAP job as a cancellable notification with the server's steps, percentage and elapsed time", async () => {
    notes.middleware('asap-tpu-1', { kind: 'begin', title: 'ASAP: TPU compiler', message: 'c.yml', cancellable: true }, next);
    expect(vscode.shown).toHaveLength(0); // shown once it has run for the delay
    clock = 500;
    vi.advanceTimersByTime(500);
    expect(vscode.shown).toHaveLength(1);
    const n = vscode.shown[0];
    expect(n.options).toEqual({ location: 15, title: 'ASAP: TPU compiler', cancellable: true });
    expect(n.reports.at(-1)).toEqual({ message: 'c.yml · elapsed 0 s' });

    clock = 12_000;
    notes.middleware('asap-tpu-1', { kind: 'report', message: 'compiling the current mesh', percentage: 25 }, next);
    expect(n.reports.at(-1)).toEqual({ message: 'compiling the current mesh · elapsed 12 s', increment: 25 });
    clock = 30_000;
    notes.middleware('asap-tpu-1', { kind: 'report', message: 'compiled 2 layers (1 of 2 done)', percentage: 60 }, next);
    // VS Code adds the increments up: 25 + 35 = 60%
    expect(n.reports.at(-1)).toEqual({ message: 'compiled 2 layers (1 of 2 done) · elapsed 30 s', increment: 35 });
    notes.middleware('asap-tpu-1', { kind: 'report', percentage: 40 }, next); // never backwards
    expect(n.reports.at(-1)).toEqual({ message: 'compiled 2 layers (1 of 2 done) · elapsed 30 s' });

    // the elapsed time moves while the server says nothing
    clock = 95_000;
    vi.advanceTimersByTime(1000);
    expect(n.reports.at(-1)).toEqual({ message: 'compiled 2 layers (1 of 2 done) · elapsed 1 min 35 s' });

    // the client's own status-bar part never sees begin or report
    expect(next).not.toHaveBeenCalled();
    notes.middleware('asap-tpu-1', { kind: 'end', message: 'done' }, next);
    expect(next).toHaveBeenCalledOnce(); // ...but sees end, to dispose its handler
    await flush();
    expect(n.closed).toBe(true);
    expect(notes.active).toBe(0);
    const reports = n.reports.length;
    vi.advanceTimersByTime(5000);
    expect(n.reports).toHaveLength(reports); // the ticker stopped
    expect(cancelled).toEqual([]);
  });

  it("sends window/workDoneProgress/cancel with the job's token when the user cancels, and closes it", async () => {
    notes.middleware('asap-tpu-1', { kind: 'begin', title: 'ASAP: TPU compiler', cancellable: true }, next);
    notes.middleware('asap-agents-2', { kind: 'begin', title: 'ASAP: diagnosing and pricing meshes', cancellable: true }, next);
    vi.advanceTimersByTime(500);
    vscode.shown[0].cancel();
    expect(cancelled).toEqual(['asap-tpu-1']);
    await flush();
    expect(vscode.shown[0].closed).toBe(true);
    expect(vscode.shown[1].closed).toBe(false);
    expect(notes.active).toBe(1);
    // the server's end after the cancel changes nothing more
    notes.middleware('asap-tpu-1', { kind: 'end', message: 'cancelled' }, next);
    notes.middleware('asap-tpu-1', { kind: 'report', message: 'late' }, next);
    expect(cancelled).toEqual(['asap-tpu-1']);
    expect(vscode.shown).toHaveLength(2);
  });

  it('a job that cannot be cancelled says so to VS Code', () => {
    notes.middleware('asap-analyzing-3', { kind: 'begin', title: 'ASAP: analyzing', message: 'c.yml' }, next);
    vi.advanceTimersByTime(500);
    expect(vscode.shown[0].options.cancellable).toBe(false);
  });

  it('a job that ends within the delay shows nothing, and a report before the delay is shown with it', () => {
    notes.middleware('asap-diagnosing-4', { kind: 'begin', title: 'ASAP: diagnosing and pricing meshes' }, next);
    clock = 300;
    notes.middleware('asap-diagnosing-4', { kind: 'end' }, next);
    vi.advanceTimersByTime(5000);
    expect(vscode.shown).toHaveLength(0);
    expect(next).toHaveBeenCalledOnce();

    notes.middleware('asap-profile-5', { kind: 'begin', title: 'ASAP: reading profile', message: 'run1' }, next);
    notes.middleware('asap-profile-5', { kind: 'report', message: 'converting trace', percentage: 10 }, next);
    clock = 800;
    vi.advanceTimersByTime(500);
    expect(vscode.shown[0].reports).toEqual([{ message: 'converting trace · elapsed 0 s', increment: 10 }]);
  });

  it("leaves other servers' tokens to the client's default part", () => {
    const params = { kind: 'begin' as const, title: 'Indexing' };
    notes.middleware('pylance-1', params, next);
    notes.middleware(42, { kind: 'end' }, next);
    expect(next).toHaveBeenNthCalledWith(1, 'pylance-1', params);
    expect(next).toHaveBeenNthCalledWith(2, 42, { kind: 'end' });
    expect(vscode.shown).toHaveLength(0);
  });

  it('closes every notification when the server stops', async () => {
    notes.middleware('asap-tpu-1', { kind: 'begin', title: 'ASAP: TPU compiler', cancellable: true }, next);
    notes.middleware('asap-profile-2', { kind: 'begin', title: 'ASAP: reading profile', cancellable: true }, next);
    vi.advanceTimersByTime(500);
    notes.dispose();
    await flush();
    expect(vscode.shown.map((s) => s.closed)).toEqual([true, true]);
    expect(cancelled).toEqual([]);
    expect(notes.active).toBe(0);
  });
});
