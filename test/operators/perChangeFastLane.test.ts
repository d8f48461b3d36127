import { lastValueFrom, of, Subject, toArray } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { filterChanges } from '../../src/operators/filterChanges.js';
import { mapChanges } from '../../src/operators/mapChanges.js';
import { batch, ns, recordingTracker, type Doc } from './batches.js';

/*
 * The per-change operators' fast lane (a lone batch with nothing pending is mapped and emitted at once) must
 * keep what the queued path guarantees: per-partition order behind a change being retried, other partitions
 * not held up, ended ownerships dropped, the batch's context active, and exact results when a predicate
 * throws part-way through a batch.
 */
describe('per-change operators: the fast lane', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps exactly the changes a predicate passed when it throws part-way, after leaving some out', async () => {
    const tracker = recordingTracker('p0');
    const input = batch('p0', [1, 2, 3, 4, 5, 6, 8], { tracker });
    const fragile = (c: Change<Doc>) => {
      if (c.document?.n === 5) throw new Error('five');
      return c.document!.n % 2 === 0;
    };
    const out = lastValueFrom(of(input).pipe(filterChanges(fragile, { onFailure: { retry: { attempts: 1 }, skip: true } })));
    await vi.runAllTimersAsync();
    expect(ns(await out)).toEqual([2, 4, 6, 8]);
    expect(tracker.errors).toHaveLength(1);
  });

  it('holds a partition behind a change being retried, in order, while another partition goes on', async () => {
    const p0 = recordingTracker('p0');
    const p1 = recordingTracker('p1');
    let failOnce = true;
    const step = (c: Change<Doc>): Change<Doc> => {
      if (c.document?.n === 2 && failOnce) {
        failOnce = false;
        throw new Error('transient');
      }
      return { ...c, document: { n: c.document!.n * 10 } };
    };
    const input = new Subject<ChangeBatch<Doc>>();
    const seen: string[] = [];
    input.pipe(mapChanges(step, { onFailure: { retry: { attempts: 3, initialBackoffMs: 100, jitter: 0 }, skip: true } })).subscribe((b) => seen.push(`${b.partition}:${ns(b).join(',')}`));
    input.next(batch('p0', [1, 2], { tracker: p0 })); // fails on 2, retried after 100 ms
    input.next(batch('p0', [3], { tracker: p0 })); // must wait behind it
    input.next(batch('p1', [4], { tracker: p1 })); // must not
    expect(seen).toEqual(['p1:40']);
    await vi.advanceTimersByTimeAsync(100);
    expect(seen).toEqual(['p1:40', 'p0:10,20', 'p0:30']);
    input.next(batch('p1', [5], { tracker: p1 })); // nothing pending any more: straight through
    expect(seen.at(-1)).toBe('p1:50');
    expect([p0.errors, p1.errors]).toEqual([[], []]);
  });

  it('drops a batch whose ownership ended instead of mapping it, and runs the map in the batch context', async () => {
    const ended = recordingTracker('p0');
    ended.end();
    const live = recordingTracker('p1');
    const active: number[] = [];
    let current: number | undefined;
    const activating = Object.assign(live, {
      activate: <R>(sequence: number, fn: () => R): R => {
        current = sequence;
        try {
          return fn();
        } finally {
          current = undefined;
        }
      },
    });
    const step = (c: Change<Doc>) => {
      active.push(current ?? -1);
      return c;
    };
    let calls = 0;
    const counted = (c: Change<Doc>) => (calls++, step(c));
    const out = await lastValueFrom(of(batch('p0', [1], { tracker: ended }), batch('p1', [2, 3], { tracker: activating })).pipe(mapChanges(counted), toArray()));
    expect(out.map((b) => b.partition)).toEqual(['p1']);
    expect(ended.dropped).toEqual([[1, undefined]]);
    expect([calls, active]).toEqual([2, [1, 1]]);
  });
});
