/**
 * The roofline view's page script (runs inside the webview, not in the extension host). It renders the
 * Vega-Lite spec the extension posts with vega-embed, using vega-interpreter so the page's content security
 * policy needs no 'unsafe-eval', and reports back when the chart is drawn (or why not).
 */
import embed from 'vega-embed';
import { expressionInterpreter } from 'vega-interpreter';

import type { ToWebview, FromWebview } from '../rooflineMessages';

declare function acquireVsCodeApi(): { postMessage(message: FromWebview): void };

const vscode = acquireVsCodeApi();
const chart = document.getElementById('chart') as HTMLElement;
const status = document.getElementById('status') as HTMLElement;

window.addEventListener('message', async (event: MessageEvent<ToWebview>) => {
  const msg = event.data;
  if (msg.type === 'error') {
    status.textContent = msg.message;
    chart.replaceChildren();
    return;
  }
  status.textContent = msg.note;
  try {
    // The panel's width, not the fixed width of the exported chart.
    const spec = { ...(msg.spec as object), width: 'container', autosize: { type: 'fit-x', contains: 'padding' } };
    await embed(chart, spec as never, {
      renderer: 'svg',
      ast: true,
      expr: expressionInterpreter,
      actions: { export: true, source: false, compiled: false, editor: false },
      tooltip: { theme: msg.theme },
    });
    vscode.postMessage({ type: 'rendered', marks: chart.querySelectorAll('.mark-symbol path').length });
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    status.textContent = `could not draw the chart: ${why}`;
    vscode.postMessage({ type: 'failed', message: why });
  }
});
vscode.postMessage({ type: 'ready' });
