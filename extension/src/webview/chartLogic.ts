/**
 * The roofline page's logic that needs no DOM (unit-tested with vitest): the labels to hide when the browser's
 * font draws them larger than the server's layout allowed for, the tooltip's rows and its position inside the
 * panel, and the chart colours taken from the VS Code theme.
 */

export interface Rect {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

export function overlaps(a: Rect, b: Rect): boolean {
  return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

/**
 * Labels in priority order (meshes, ridges, then ops): the indexes of those to hide so that no two shown
 * overlap. A label is hidden when it overlaps one kept before it, or any of `obstacles` (the points).
 */
export function labelsToHide(labels: Rect[], obstacles: Rect[] = []): number[] {
  const kept: Rect[] = [];
  const hidden: number[] = [];
  labels.forEach((box, i) => {
    if (kept.some((k) => overlaps(k, box)) || obstacles.some((o) => overlaps(o, box))) hidden.push(i);
    else kept.push(box);
  });
  return hidden;
}

export interface TooltipRow {
  key: string;
  value: string;
}

/** What a chart item's tooltip shows: the server's `tip` object as key/value rows, a plain string as one row;
 * empty, null and undefined values are left out (never "undefined"). */
export function tooltipRows(value: unknown): TooltipRow[] {
  if (value === null || value === undefined || value === '') return [];
  if (typeof value !== 'object') return [{ key: '', value: String(value) }];
  return Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([key, v]) => ({ key, value: typeof v === 'object' ? JSON.stringify(v) : String(v) }));
}

/**
 * Where the tooltip goes: below and right of the pointer, flipped to the other side when it would cross the
 * panel's edge, and clamped inside the panel (a `margin` from each edge) when it fits neither way.
 */
export function tooltipPosition(
  pointer: { x: number; y: number },
  size: { w: number; h: number },
  view: { w: number; h: number },
  offset = 12,
  margin = 4,
): { left: number; top: number } {
  const place = (at: number, len: number, limit: number): number => {
    let p = at + offset;
    if (p + len > limit - margin) p = at - offset - len;
    return Math.max(margin, Math.min(p, limit - margin - len));
  };
  return { left: place(pointer.x, size.w, view.w), top: place(pointer.y, size.h, view.h) };
}

/**
 * The server's chart colours with the panel's background and text taken from the VS Code theme (its CSS
 * variables), so the chart sits on the editor's own background in any theme; marks keep the server's palette,
 * chosen for the light or dark kind of theme.
 */
export function themeConfig(
  css: (name: string) => string,
  base: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const cfg: Record<string, unknown> = { ...(base ?? {}) };
  const background = css('--vscode-editor-background').trim();
  const text = (css('--vscode-editor-foreground') || css('--vscode-foreground')).trim();
  if (background) cfg.background = background;
  if (text) {
    const sub = (key: string, patch: Record<string, unknown>) => {
      cfg[key] = { ...((cfg[key] as Record<string, unknown> | undefined) ?? {}), ...patch };
    };
    sub('title', { color: text, subtitleColor: text });
    sub('text', { color: text });
    sub('axis', { labelColor: text, titleColor: text });
    sub('legend', { labelColor: text, titleColor: text });
  }
  return cfg;
}
