import { getEventListeners } from 'node:events';
import { asyncScheduler } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import { Sleeper } from '../../src/internal/wait.js';
import { abortWatchers } from '../../src/internal/abortWatch.js';
import { withFakeTimers } from '../support/fakeTimers.js';

describe('Sleeper', () => {
  withFakeTimers();

  it('sleeps again and again on one watch of the signal, each sleep resolving after its time', async () => {
    const stop = new AbortController();
    const sleeper = new Sleeper(asyncScheduler);
    for (const ms of [5_000, 1, 0, 2_500]) {
      let done = false;
      const wait = sleeper.sleep(ms, stop.signal).then(() => (done = true));
      expect(abortWatchers(stop.signal)).toBe(1);
      expect(vi.getTimerCount()).toBe(1);
      if (ms > 0) {
        await vi.advanceTimersByTimeAsync(ms - 1);
        expect(done).toBe(false);
      }
      await vi.advanceTimersByTimeAsync(1);
      await wait;
      expect(done).toBe(true);
      expect(vi.getTimerCount()).toBe(0);
    }
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    sleeper.dispose();
    expect(abortWatchers(stop.signal)).toBe(0);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });

  it('ends the sleep in progress at once on abort, cancels its timer, and resolves at once on an aborted signal', async () => {
    const stop = new AbortController();
    const sleeper = new Sleeper(asyncScheduler);
    await vi.advanceTimersByTimeAsync(0);
    let ended = 0;
    const wait = sleeper.sleep(60_000, stop.signal).then(() => ended++);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(ended).toBe(0);
    stop.abort();
    await wait;
    expect(ended).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
    expect(abortWatchers(stop.signal)).toBe(0);
    await sleeper.sleep(60_000, stop.signal);
    expect(vi.getTimerCount()).toBe(0);
    expect(abortWatchers(stop.signal)).toBe(0);
  });

  it('watches only the signal of its latest sleep; dispose ends a sleep in progress and may sleep again', async () => {
    const first = new AbortController();
    const second = new AbortController();
    const sleeper = new Sleeper(asyncScheduler);
    const a = sleeper.sleep(10, first.signal);
    await vi.advanceTimersByTimeAsync(10);
    await a;
    let ended = 0;
    const b = sleeper.sleep(10_000, second.signal).then(() => ended++);
    expect(abortWatchers(first.signal)).toBe(0);
    expect(abortWatchers(second.signal)).toBe(1);
    first.abort(); // no longer watched: the sleep goes on
    await vi.advanceTimersByTimeAsync(1);
    expect(ended).toBe(0);
    sleeper.dispose();
    await b;
    expect(ended).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
    expect(abortWatchers(second.signal)).toBe(0);
    const c = sleeper.sleep(5, second.signal);
    await vi.advanceTimersByTimeAsync(5);
    await c;
    sleeper.dispose();
  });
});
