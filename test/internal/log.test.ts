import createDebug from 'debug';
import { format } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { logger } from '../../src/internal/log.js';

const originalLog = createDebug.log;
const originalSelectColor = createDebug.selectColor;
const enabledBefore = createDebug.disable();

afterEach(() => {
  createDebug.log = originalLog;
  createDebug.selectColor = originalSelectColor;
  createDebug.disable();
  if (enabledBefore) createDebug.enable(enabledBefore);
});

/** Captures the lines `debug` writes (without colours or timestamps). */
function capture(): string[] {
  const lines: string[] = [];
  createDebug.log = (...args: unknown[]) => {
    lines.push(format(...args));
  };
  return lines;
}

describe('logger', () => {
  it('tags each line with owner and lease, under rxfeed:<area>', () => {
    const lines = capture();
    createDebug.enable('rxfeed:test-tags');
    logger('test-tags', { owner: 'host-1', lease: '7' })('read %d changes', 3);
    logger('test-tags')('untagged');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('rxfeed:test-tags');
    expect(lines[0]).toContain('[owner=host-1 lease=7] read 3 changes');
    expect(lines[1]).toContain('untagged');
    expect(lines[1]).not.toContain('[');
  });

  it('writes nothing while its namespace is disabled, and follows enable() made after it was created', () => {
    const lines = capture();
    const log = logger('test-toggle', { lease: '1' });
    log('before');
    expect(lines).toEqual([]);
    createDebug.enable('rxfeed:test-toggle');
    log('after');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('[lease=1] after');
  });

  it('shares one debug instance per area, however many leases log', () => {
    let created = 0;
    // `debug` picks a colour once for each instance it creates.
    createDebug.selectColor = (namespace) => {
      created++;
      return originalSelectColor(namespace);
    };
    for (let lease = 0; lease < 1000; lease++) logger('test-shared', { owner: 'h', lease: String(lease) });
    logger('test-shared-other');
    expect(created).toBe(2);
  });
});
