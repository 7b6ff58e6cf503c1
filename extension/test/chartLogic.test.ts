import { describe, expect, it } from 'vitest';

import { labelsToHide, overlaps, themeConfig, tooltipPosition, tooltipRows } from '../src/webview/chartLogic';

const box = (x0: number, y0: number, w: number, h: number) => ({ x0, y0, x1: x0 + w, y1: y0 + h });

describe('roofline page logic', () => {
  it('hides the later of two overlapping labels, and labels over a point, keeping the rest', () => {
    // a crowded case: 12 labels 30 px wide at 10 px steps on one line, priority in order
    const row = Array.from({ length: 12 }, (_, i) => box(i * 10, 0, 30, 12));
    const hidden = labelsToHide(row);
    expect(hidden).toEqual([1, 2, 4, 5, 7, 8, 10, 11]);
    const shown = row.filter((_, i) => !hidden.includes(i));
    for (const a of shown) for (const b of shown) if (a !== b) expect(overlaps(a, b)).toBe(false);
    // touching edges do not overlap; a label on a point is hidden even when first
    expect(overlaps(box(0, 0, 10, 10), box(10, 0, 10, 10))).toBe(false);
    expect(labelsToHide([box(0, 0, 20, 10), box(40, 0, 20, 10)], [box(45, 2, 6, 6)])).toEqual([1]);
  });

  it('turns the tip object into rows, never "undefined"', () => {
    const rows = tooltipRows({
      point: 'P1 (proposal 1)',
      mesh: 'fsdp=256',
      attained: '131 TFLOP/s per device (66% of peak)',
      missing: undefined,
      empty: '',
      none: null,
    });
    expect(rows).toEqual([
      { key: 'point', value: 'P1 (proposal 1)' },
      { key: 'mesh', value: 'fsdp=256' },
      { key: 'attained', value: '131 TFLOP/s per device (66% of peak)' },
    ]);
    expect(rows.map((r) => r.value).join(' ')).not.toContain('undefined');
    expect(tooltipRows('now \u2192 P1: x2.14')).toEqual([{ key: '', value: 'now \u2192 P1: x2.14' }]);
    expect(tooltipRows(undefined)).toEqual([]);
    expect(tooltipRows(null)).toEqual([]);
  });

  it('keeps the tooltip inside the panel', () => {
    const view = { w: 500, h: 400 };
    const size = { w: 300, h: 120 };
    expect(tooltipPosition({ x: 10, y: 10 }, size, view)).toEqual({ left: 22, top: 22 });
    // near the right and bottom edges: flipped to the pointer's other side
    expect(tooltipPosition({ x: 450, y: 380 }, size, view)).toEqual({ left: 138, top: 248 });
    // wider than either side of the pointer: clamped to the panel
    for (const x of [0, 100, 250, 400, 500]) {
      const at = tooltipPosition({ x, y: 200 }, { w: 460, h: 50 }, view);
      expect(at.left).toBeGreaterThanOrEqual(4);
      expect(at.left + 460).toBeLessThanOrEqual(496);
    }
  });

  it("takes the chart's background and text from the VS Code theme", () => {
    const vars: Record<string, string> = { '--vscode-editor-background': ' #1f1f1f', '--vscode-foreground': '#cccccc' };
    const base = { background: '#1e1e1e', axis: { gridColor: '#3a3a3a', labelColor: '#e0e0e0' } };
    const cfg = themeConfig((n) => vars[n] ?? '', base);
    expect(cfg.background).toBe('#1f1f1f');
    expect(cfg.axis).toEqual({ gridColor: '#3a3a3a', labelColor: '#cccccc', titleColor: '#cccccc' });
    expect(cfg.text).toEqual({ color: '#cccccc' });
    expect(base.background).toBe('#1e1e1e'); // the server's spec is not changed
    expect(themeConfig(() => '', base)).toEqual(base); // outside VS Code: the server's palette
  });
});
