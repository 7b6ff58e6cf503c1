/** Logging for the ASAP output channel: every line is redacted before it is written. */

/** Anthropic API keys; the server gets one from settings, so it must never reach a log. */
const SECRET = /sk-ant-[\w-]+/g;
/** The password of a postgresql:// URL anywhere in a text (asap.store): "postgresql://user:PASSWORD@host". */
export const URL_PASSWORD = /(postgres(?:ql)?:\/\/[^:/@\s]*:)[^@\s]*@/gi;

export function redact(text: string): string {
  return text.replace(SECRET, 'sk-ant-***').replace(URL_PASSWORD, '$1***@');
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

/** The LogOutputChannel methods the language client's channel writes through. */
export interface LevelSink extends LogSink {
  debug(message: string): void;
}

const CLIENT_LINE = /^\[(Trace|Debug|Info|Warn|Error)\s*-\s*[^\]]*\]\s?([\s\S]*)$/;

/** One line the language client wrote ("[Info  - 10:11:12 PM] message", or plain text) as a level and a message
 * without the client's own prefix (the channel adds the time and the level: one format). Protocol traces
 * (asap.trace.server) are written at info, so that they show at the channel's default level. */
export function parseClientLine(line: string): { level: 'debug' | 'info' | 'warn' | 'error'; message: string } {
  const m = CLIENT_LINE.exec(line);
  if (!m) return { level: 'info', message: line };
  const level = ({ Trace: 'info', Debug: 'debug', Info: 'info', Warn: 'warn', Error: 'error' } as const)[
    m[1] as 'Trace' | 'Debug' | 'Info' | 'Warn' | 'Error'
  ];
  return { level, message: m[2] };
}

/** What the language client needs of an output channel (vscode.OutputChannel's writing half). */
export interface ClientChannel {
  append(value: string): void;
  appendLine(value: string): void;
  replace(value: string): void;
  clear(): void;
}

/** The channel handed to the language client: its own log lines lose their "[Info  - time]" prefix and go to the
 * ASAP channel at their level; the server's stderr (appended in arbitrary chunks) is split into lines, blank lines
 * dropped, each line one entry. Everything is redacted. Without it the channel mixed two formats and blank lines. */
export function clientChannel(sink: LevelSink): ClientChannel {
  let pending = '';
  const write = (line: string): void => {
    const { level, message } = parseClientLine(line.replace(/\s+$/, ''));
    if (message.trim() === '') return;
    sink[level](redact(message));
  };
  return {
    append(value: string): void {
      const parts = (pending + value).split(/\r?\n/);
      pending = parts.pop() ?? '';
      for (const p of parts) write(p);
    },
    appendLine(value: string): void {
      if (pending) {
        write(pending);
        pending = '';
      }
      write(value);
    },
    replace(value: string): void {
      pending = '';
      write(value);
    },
    clear(): void {
      pending = '';
    },
  };
}

/** An error as a short message for people: the first line, without a Python exception's class name
 * ("ValueError: no profiles in ..." -> "no profiles in ...") or a traceback. */
export function userMessage(e: unknown): string {
  const raw = e instanceof Error ? e.message : String(e);
  const first = raw.split(/\r?\n/).find((l) => l.trim() !== '' && !l.startsWith('Traceback')) ?? raw;
  return first.trim().replace(/^(?:[\w.]+\.)?\w*(?:Error|Exception):\s*/, '');
}
