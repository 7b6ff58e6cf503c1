/** Messages between the roofline panel (extension host) and its page script (webview). */
export type ToWebview =
  | { type: 'render'; spec: unknown; theme: 'light' | 'dark'; note: string }
  | { type: 'error'; message: string };

/** `marks`: the points drawn; `hiddenLabels`: labels the page hid because this browser drew them overlapping. */
export type FromWebview =
  | { type: 'ready' }
  | { type: 'rendered'; marks: number; hiddenLabels?: number }
  | { type: 'failed'; message: string };
