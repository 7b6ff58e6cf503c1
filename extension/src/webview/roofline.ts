/**
 * The roofline view's page script (runs inside the webview, not in the extension host). It renders the
 * Vega-Lite spec the extension posts with vega-embed, using vega-interpreter so the page's content security
 * policy needs no 'unsafe-eval', and reports back when the chart is drawn (or why not).
 *
 * The server lays the chart out at a fixed size (labels placed where none overlaps); the page draws it at that
 * size and lets it shrink with a narrow panel (the SVG scales as a whole, so the layout holds). Colours of the
 * background and text come from the VS Code theme; tooltips are drawn by the page, inside the panel, from each
 * item's `tip` object.
 */
import embed from 'vega-embed';
import { expressionInterpreter } from 'vega-interpreter';

import type { ToWebview, FromWebview } from '../rooflineMessages';
import { labelsToHide, type Rect, themeConfig, tooltipPosition, tooltipRows } from './chartLogic';

declare function acquireVsCodeApi(): { postMessage(message: FromWebview): void };

const vscode = acquireVsCodeApi();
const chart = document.getElementById('chart') as HTMLElement;
const status = document.getElementById('status') as HTMLElement;
const tip = document.getElementById('tip') as HTMLElement;
// Label marks in priority order: a label hidden by the page is the later one of an overlapping pair.
const LABEL_MARKS = ['mesh_labels_marks', 'compiled_labels_marks', 'ridge_labels_marks', 'op_labels_marks'];
// compiled_*: present only when Verify simulated a mesh's compiled program
const POINT_MARKS = ['meshes_marks', 'compiled_marks', 'ops_marks'];

function showTooltip(_handler: unknown, event: MouseEvent, _item: unknown, value: unknown): void {
  const rows = tooltipRows(value);
  if (!rows.length || !event) {
    tip.hidden = true;
    return;
  }
  tip.replaceChildren(
    ...rows.map(({ key, value: v }) => {
      const row = document.createElement('div');
      row.className = 'row';
      if (key) {
        const k = document.createElement('span');
        k.className = 'key';
        k.textContent = key;
        row.append(k);
      }
      const val = document.createElement('span');
      val.className = 'value';
      val.textContent = v;
      row.append(val);
      return row;
    }),
  );
  tip.hidden = false;
  const at = tooltipPosition(
    { x: event.clientX, y: event.clientY },
    { w: tip.offsetWidth, h: tip.offsetHeight },
    { w: document.documentElement.clientWidth, h: document.documentElement.clientHeight },
  );
  tip.style.left = `${at.left}px`;
  tip.style.top = `${at.top}px`;
}

function rect(e: Element): Rect {
  const r = e.getBoundingClientRect();
  return { x0: r.left, y0: r.top, x1: r.right, y1: r.bottom };
}

/** The server placed the labels for its estimate of the font's widths; where this browser's font draws them
 * wider and two now touch, the later one is hidden (its point's tooltip still names it). */
function hideOverlappingLabels(): number {
  const labels = LABEL_MARKS.flatMap((m) => [...chart.querySelectorAll(`g.${m} > text`)]);
  const points = POINT_MARKS.flatMap((m) => [...chart.querySelectorAll(`g.${m} > path`)]).map(rect);
  const hidden = labelsToHide(labels.map(rect), points);
  for (const i of hidden) labels[i].setAttribute('visibility', 'hidden');
  return hidden.length;
}

window.addEventListener('message', async (event: MessageEvent<ToWebview>) => {
  const msg = event.data;
  tip.hidden = true;
  if (msg.type === 'error') {
    status.textContent = msg.message;
    chart.replaceChildren();
    delete chart.dataset.theme;
    return;
  }
  status.textContent = msg.note;
  try {
    const spec = msg.spec as { config?: Record<string, unknown> };
    const css = getComputedStyle(document.body);
    const themed = { ...spec, config: themeConfig((n) => css.getPropertyValue(n), spec.config) };
    await embed(chart, themed as never, {
      renderer: 'svg',
      ast: true,
      expr: expressionInterpreter,
      actions: { export: true, source: false, compiled: false, editor: false },
      tooltip: showTooltip,
    });
    const hidden = hideOverlappingLabels();
    chart.dataset.theme = msg.theme;
    chart.dataset.hiddenLabels = String(hidden);
    vscode.postMessage({
      type: 'rendered',
      marks: POINT_MARKS.reduce((n, m) => n + chart.querySelectorAll(`g.${m} > path`).length, 0),
      hiddenLabels: hidden,
    });
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    status.textContent = `could not draw the chart: ${why}`;
    vscode.postMessage({ type: 'failed', message: why });
  }
});
document.addEventListener('mouseleave', () => {
  tip.hidden = true;
});
vscode.postMessage({ type: 'ready' });
