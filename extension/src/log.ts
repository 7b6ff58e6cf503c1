/** Logging for the ASAP output channel: every line is redacted before it is written. */

/** Anthropic API keys; the server gets one from settings, so it must never reach a log. */
const SECRET = /sk-ant-[\w-]+/g;

export function redact(text: string): string {
  return text.replace(SECRET, 'sk-ant-***');
}

/** The part of vscode.LogOutputChannel the extension writes to. */
export interface LogSink {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export type Logger = LogSink;

export function redactingLogger(sink: LogSink): Logger {
  return {
    info: (m) => sink.info(redact(m)),
    warn: (m) => sink.warn(redact(m)),
    error: (m) => sink.error(redact(m)),
  };
}
