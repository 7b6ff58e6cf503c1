import { beforeEach, describe, expect, it, vi } from 'vitest';

type Listener = (m: unknown) => void;
const state = vi.hoisted(() => ({
  panels: [] as {
    title: string;
    webview: { html: string; posted: unknown[]; listener?: Listener; cspSource: string };
    disposeListener?: () => void;
    revealed: number;
  }[],
  diagListeners: [] as ((e: { uris: { toString(): string }[] }) => void)[],
  themeListeners: [] as (() => void)[],
  editorListeners: [] as ((e: unknown) => void)[],
}));
const vscode = vi.hoisted(() => {
  class Uri {
    constructor(
      readonly path: string,
      readonly scheme = 'file',
    ) {}
    static parse(s: string) {
      const m = /^([a-z-]+):(?:\/\/)?(.*)$/.exec(s);
      return m ? new Uri(m[1] === 'file' ? `/${m[2].replace(/^\/+/, '')}` : m[2], m[1]) : new Uri(s);
    }
    static joinPath(u: Uri, ...parts: string[]) {
      return new Uri([u.path, ...parts].join('/'));
    }
    get fsPath() {
      return this.path;
    }
    toString() {
      return this.scheme === 'file' ? `file://${this.path}` : `${this.scheme}:${this.path}`;
    }
  }
  return {
    Uri,
    ColorThemeKind: { Light: 1, Dark: 2, HighContrast: 3, HighContrastLight: 4 },
    ViewColumn: { Beside: -2 },
    window: {
      activeColorTheme: { kind: 2 },
      activeTextEditor: undefined as unknown,
      showErrorMessage: vi.fn(),
      onDidChangeActiveColorTheme: vi.fn((cb: () => void) => {
        state.themeListeners.push(cb);
        return { dispose: vi.fn() };
      }),
      onDidChangeActiveTextEditor: vi.fn((cb: (e: unknown) => void) => {
        state.editorListeners.push(cb);
        return { dispose: vi.fn() };
      }),
      createWebviewPanel: vi.fn((_type: string, title: string) => {
        const panel = {
          title,
          revealed: 0,
          reveal() {
            panel.revealed++;
          },
          dispose: vi.fn(),
          onDidDispose(cb: () => void) {
            (panel as { disposeListener?: () => void }).disposeListener = cb;
          },
          webview: {
            html: '',
            cspSource: 'vscode-resource:',
            posted: [] as unknown[],
            listener: undefined as Listener | undefined,
            asWebviewUri: (u: Uri) => `webview://${u.path}`,
            onDidReceiveMessage(cb: Listener) {
              panel.webview.listener = cb;
            },
            postMessage: vi.fn(async (m: unknown) => {
              panel.webview.posted.push(m);
              return true;
            }),
          },
        };
        state.panels.push(panel as never);
        return panel;
      }),
    },
    languages: {
      onDidChangeDiagnostics: vi.fn((cb: (e: { uris: { toString(): string }[] }) => void) => {
        state.diagListeners.push(cb);
        return { dispose: vi.fn() };
      }),
    },
  };
});
vi.mock('vscode', () => vscode);

import { SERVER_COMMANDS } from '../src/contract';
import { chartTheme, RooflineViews, rooflineHtml } from '../src/roofline';
import { memoryLogger } from './helpers';

const URI = 'file:///ws/c.yml';
const until = async (cond: () => boolean) => {
  for (let i = 0; i < 50 && !cond(); i++) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
};

describe('roofline view', () => {
  beforeEach(() => {
    state.panels = [];
    state.diagListeners = [];
    state.themeListeners = [];
    state.editorListeners = [];
    vscode.window.activeColorTheme.kind = 2;
  });

  it('maps colour themes to the chart palettes', () => {
    expect(chartTheme(vscode.ColorThemeKind.Dark as never)).toBe('dark');
    expect(chartTheme(vscode.ColorThemeKind.HighContrast as never)).toBe('dark');
    expect(chartTheme(vscode.ColorThemeKind.Light as never)).toBe('light');
    expect(chartTheme(vscode.ColorThemeKind.HighContrastLight as never)).toBe('light');
  });

  it('serves a page whose scripts run by nonce only, without eval', () => {
    const html = rooflineHtml('vscode-resource:', 'webview://dist/roofline.js', 'N0nce');
    const csp = /Content-Security-Policy" content="([^"]+)"/.exec(html)?.[1] ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'nonce-N0nce'");
    expect(csp).not.toContain('unsafe-eval');
    expect(html).toContain('<script nonce="N0nce" src="webview://dist/roofline.js">');
  });

  it("draws the server's chart once the page is ready, redraws on the config's diagnostics and theme", async () => {
    const run = vi.fn(async (_c: string, args: unknown[]) => ({
      title: 'ASAP roofline: c.yml',
      fresh: args[1] === 'dark',
      spec: { theme: args[1] },
    }));
    const log = memoryLogger();
    const views = new RooflineViews(new vscode.Uri('/ext') as never, run, log);
    expect(views.show(URI)).toBe(true);
    const [panel] = state.panels;
    expect(panel.webview.html).toContain('webview:///ext/dist/roofline.js');
    expect(run).not.toHaveBeenCalled(); // nothing is posted before the page script listens
    panel.webview.listener?.({ type: 'ready' });
    await until(() => panel.webview.posted.length === 1);
    expect(run).toHaveBeenCalledWith(SERVER_COMMANDS.roofline, [URI, 'dark']);
    expect(panel.webview.posted[0]).toMatchObject({ type: 'render', theme: 'dark', spec: { theme: 'dark' } });
    expect(panel.title).toBe('ASAP roofline: c.yml');

    vscode.window.activeColorTheme.kind = 1;
    for (const cb of state.themeListeners) cb();
    await until(() => panel.webview.posted.length === 2);
    expect(panel.webview.posted[1]).toMatchObject({ type: 'render', theme: 'light' });
    expect((panel.webview.posted[1] as { note: string }).note).toContain('proposals appear once');

    vi.useFakeTimers();
    for (const cb of state.diagListeners) cb({ uris: [{ toString: () => 'file:///ws/other.yml' }] });
    for (const cb of state.diagListeners) cb({ uris: [{ toString: () => URI }] });
    for (const cb of state.diagListeners) cb({ uris: [{ toString: () => URI }] });
    await vi.runAllTimersAsync();
    vi.useRealTimers();
    await until(() => panel.webview.posted.length === 3); // a burst of publishes: one redraw, other files: none
    expect(run).toHaveBeenCalledTimes(3);

    expect(views.show(URI)).toBe(true); // the same config: the same panel, revealed
    expect(state.panels).toHaveLength(1);
    expect(panel.revealed).toBe(1);
    panel.webview.listener?.({ type: 'rendered', marks: 7 });
    expect(log.lines.at(-1)).toBe('info roofline drawn for /ws/c.yml: 7 points');
    panel.webview.listener?.({ type: 'rendered', marks: 7, hiddenLabels: 2 });
    expect(log.lines.at(-1)).toBe('info roofline drawn for /ws/c.yml: 7 points (2 labels hidden to avoid overlaps)');
  });

  it('follows the active config editor, and stays put for YAML the server cannot chart', async () => {
    const OTHER = 'file:///ws/other.yml';
    const run = vi.fn(async (_c: string, args: unknown[]) => {
      if (args[0] === 'file:///ws/workflow.yml') throw new Error('no estimate for this config');
      const name = String(args[0]).split('/').pop();
      return { title: `ASAP roofline: ${name}`, fresh: true, spec: { uri: args[0] } };
    });
    const log = memoryLogger();
    const views = new RooflineViews(new vscode.Uri('/ext') as never, run, log);
    const editor = (uri: string, languageId = 'yaml') => ({
      document: { uri: vscode.Uri.parse(uri), languageId },
    });
    for (const cb of state.editorListeners) cb(editor(OTHER)); // no panel yet: nothing to follow
    expect(run).not.toHaveBeenCalled();
    views.show(URI);
    const [panel] = state.panels;
    panel.webview.listener?.({ type: 'ready' });
    await until(() => panel.webview.posted.length === 1);

    for (const cb of state.editorListeners) cb(editor(OTHER));
    await until(() => panel.webview.posted.length === 2);
    expect(panel.webview.posted[1]).toMatchObject({ type: 'render', spec: { uri: OTHER } });
    expect(panel.title).toBe('ASAP roofline: other.yml');
    expect(views.shown).toBe(OTHER);
    expect(state.panels).toHaveLength(1); // the same panel, redrawn for the other config

    // its diagnostics now redraw it; the first config's do not
    vi.useFakeTimers();
    for (const cb of state.diagListeners) cb({ uris: [{ toString: () => URI }] });
    await vi.runAllTimersAsync();
    expect(run).toHaveBeenCalledTimes(2);
    for (const cb of state.diagListeners) cb({ uris: [{ toString: () => OTHER }] });
    await vi.runAllTimersAsync();
    vi.useRealTimers();
    await until(() => panel.webview.posted.length === 3);
    expect(run).toHaveBeenLastCalledWith(SERVER_COMMANDS.roofline, [OTHER, 'dark']);

    // a YAML file that is no config: the chart stays; an editor of a language ASAP does not read (plain text; YAML,
    // shell scripts, Makefiles and Markdown it does) or none (the panel focused): ignored
    for (const cb of state.editorListeners) cb(editor('file:///ws/workflow.yml'));
    await until(() => log.lines.some((l) => l.includes('roofline stays on /ws/other.yml')));
    for (const cb of state.editorListeners) cb(editor('file:///ws/notes.txt', 'plaintext'));
    for (const cb of state.editorListeners) cb(undefined);
    for (const cb of state.editorListeners) cb(editor('output:asap', 'yaml'));
    await new Promise((r) => setImmediate(r));
    expect(run).toHaveBeenCalledTimes(4);
    expect(views.shown).toBe(OTHER);
    expect(panel.webview.posted).toHaveLength(3);

    // back to the first config
    for (const cb of state.editorListeners) cb(editor(URI));
    await until(() => panel.webview.posted.length === 4);
    expect(panel.webview.posted[3]).toMatchObject({ spec: { uri: URI } });
    expect(views.shown).toBe(URI);
  });

  it('keeps only the reply to the latest request when configs switch quickly', async () => {
    const replies: Record<string, (v: unknown) => void> = {};
    const run = vi.fn(
      (_c: string, args: unknown[]) =>
        new Promise((resolve) => {
          replies[String(args[0])] = resolve;
        }),
    );
    const views = new RooflineViews(new vscode.Uri('/ext') as never, run, memoryLogger());
    views.show(URI);
    const [panel] = state.panels;
    panel.webview.listener?.({ type: 'ready' });
    const editor = (uri: string) => ({ document: { uri: vscode.Uri.parse(uri), languageId: 'yaml' } });
    for (const cb of state.editorListeners) cb(editor('file:///ws/b.yml'));
    await until(() => Object.keys(replies).length === 2);
    replies['file:///ws/b.yml']({ title: 'ASAP roofline: b.yml', fresh: true, spec: { uri: 'b' } });
    replies[URI]({ title: 'ASAP roofline: c.yml', fresh: true, spec: { uri: 'c' } }); // late: dropped
    await until(() => panel.webview.posted.length === 1);
    await new Promise((r) => setImmediate(r));
    expect(panel.webview.posted).toEqual([expect.objectContaining({ spec: { uri: 'b' } })]);
    expect(views.shown).toBe('file:///ws/b.yml');

    // a redraw (the old config's diagnostics, a theme change) while a switch is in flight: it goes on with the
    // switch instead of drawing the config being left (seen in the e2e: the panel stayed on the old config)
    for (const cb of state.editorListeners) cb(editor(URI));
    await until(() => run.mock.calls.length === 3);
    for (const cb of state.themeListeners) cb();
    await until(() => run.mock.calls.length === 4);
    expect(run.mock.calls[3][1]).toEqual([URI, 'dark']);
    replies[URI]({ title: 'ASAP roofline: c.yml', fresh: true, spec: { uri: 'c2' } });
    await until(() => panel.webview.posted.length === 2);
    expect(panel.webview.posted[1]).toMatchObject({ spec: { uri: 'c2' } });
    expect(views.shown).toBe(URI);
  });

  it("shows the server's refusal in the page", async () => {
    const run = vi.fn(async () => Promise.reject(new Error('no estimate for this config')));
    const views = new RooflineViews(new vscode.Uri('/ext') as never, run, memoryLogger());
    views.show(URI);
    state.panels[0].webview.listener?.({ type: 'ready' });
    await until(() => state.panels[0].webview.posted.length === 1);
    expect(state.panels[0].webview.posted[0]).toEqual({ type: 'error', message: 'ASAP: no estimate for this config' });
    expect(views.show(undefined)).toBe(false); // no argument and no YAML editor
    expect(vscode.window.showErrorMessage).toHaveBeenCalled();
  });
});
