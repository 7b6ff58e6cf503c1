import { describe, expect, it } from 'vitest';

import { redact, redactingLogger } from '../src/log';
import { memoryLogger } from './helpers';

describe('redact', () => {
  it('hides every Anthropic key, including dashes and underscores', () => {
    expect(redact('key=sk-ant-api03-AbC_d-9 and "sk-ant-xyz"')).toBe('key=sk-ant-*** and "sk-ant-***"');
  });

  it('hides the password of a shared store URL in any line (every module logs through it)', () => {
    expect(redact('store postgresql://ana:s3cr%40t@db:5432/asap unavailable; POSTGRES://x:y@h/d')).toBe(
      'store postgresql://ana:***@db:5432/asap unavailable; POSTGRES://x:***@h/d',
    );
    expect(redact('postgresql://ana@db/asap')).toBe('postgresql://ana@db/asap');
  });

  it('leaves text without keys alone', () => {
    expect(redact('sk-other-123 ask-ant')).toBe('sk-other-123 ask-ant');
  });
});

describe('redactingLogger', () => {
  it('redacts at every level before the channel sees the text', () => {
    const sink = memoryLogger();
    const log = redactingLogger(sink);
    log.info('settings {"apiKey":"sk-ant-api03-secret"}');
    log.warn('sk-ant-1');
    log.error('failed with sk-ant-2-x');
    expect(sink.lines).toEqual(['info settings {"apiKey":"sk-ant-***"}', 'warn sk-ant-***', 'error failed with sk-ant-***']);
    expect(sink.lines.join('\n')).not.toMatch(/secret|sk-ant-\w/);
  });
});
