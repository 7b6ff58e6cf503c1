/** Messages between the roofline panel (extension host) and its page script (webview). */
export type ToWebview =
  | { type: 'render'; spec: unknown; theme: 'light' | 'dark'; note: string }
  | { type: 'error'; message: string };

export type FromWebview = { type: 'ready' } | { type: 'rendered'; marks: number } | { type: 'failed'; message: string };
