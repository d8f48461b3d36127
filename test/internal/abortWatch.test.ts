import { getEventListeners } from 'node:events';
import { asyncScheduler } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import { aborted, sleep } from '../../src/internal/wait.js';
import { AnnouncedAbortController, abortWatchers, onAbort } from '../../src/internal/abortWatch.js';
import { withFakeTimers } from '../support/fakeTimers.js';

describe('onAbort', () => {
  it('watches the signal of an AnnouncedAbortController without a listener on it: its abort() calls the waits, after the event', () => {
    const controller = new AnnouncedAbortController();
    const calls: string[] = [];
    controller.signal.addEventListener('abort', () => calls.push('event'));
    const ended = onAbort(controller.signal, () => calls.push('ended wait'));
    onAbort(controller.signal, () => calls.push('first'));
    onAbort(controller.signal, () => calls.push('second'));
    ended();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    expect(abortWatchers(controller.signal)).toBe(2);
    controller.abort(new Error('deadline'));
    expect(controller.signal.aborted).toBe(true);
    expect((controller.signal.reason as Error).message).toBe('deadline');
    expect(calls).toEqual(['event', 'first', 'second']);
    expect(abortWatchers(controller.signal)).toBe(0);
    controller.abort(); // a second abort changes nothing and calls nothing
    expect(calls).toHaveLength(3);
    let late = 0;
    onAbort(controller.signal, () => late++); // aborted already: never called
    expect(late).toBe(0);
  });

  it('calls the waits on an AnnouncedAbortController\'s signal in the order they began, whichever ended between', () => {
    const controller = new AnnouncedAbortController();
    const calls: string[] = [];
    const same = () => calls.push('same');
    const a = onAbort(controller.signal, () => calls.push('a'));
    a();
    expect(abortWatchers(controller.signal)).toBe(0);
    const stopSame = onAbort(controller.signal, same);
    onAbort(controller.signal, same);
    const c = onAbort(controller.signal, () => calls.push('c'));
    stopSame(); // the oldest ends: the next ones are still called in order, the same function once
    onAbort(controller.signal, () => calls.push('d'));
    c();
    c(); // a second stop of the same wait does nothing
    expect(abortWatchers(controller.signal)).toBe(2);
    controller.abort();
    expect(calls).toEqual(['same', 'd']);
    expect(abortWatchers(controller.signal)).toBe(0);
  });

  it("calls an AnnouncedAbortController's waits in the order they began, for random waits and stops", () => {
    // Against a plain list of the waits still on: whatever slot or set each wait went to, the order is theirs.
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let plan = 0; plan < 300; plan++) {
      const controller = new AnnouncedAbortController();
      const on: number[] = [];
      const stops = new Map<number, () => void>();
      const calls: number[] = [];
      for (let step = 0; step < 12; step++) {
        if (stops.size === 0 || random() < 0.55) {
          const id = step;
          stops.set(id, onAbort(controller.signal, () => calls.push(id)));
          on.push(id);
        } else {
          const id = [...stops.keys()][Math.floor(random() * stops.size)]!;
          stops.get(id)!();
          stops.delete(id);
          on.splice(on.indexOf(id), 1);
        }
        expect(abortWatchers(controller.signal)).toBe(on.length);
      }
      controller.abort();
      expect(calls).toEqual(on);
    }
  });

  it('calls each watching callback once on abort, through one listener on the signal', () => {
    const stop = new AbortController();
    const calls: number[] = [];
    for (let i = 0; i < 20; i++) onAbort(stop.signal, () => calls.push(i));
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    expect(abortWatchers(stop.signal)).toBe(20);
    stop.abort();
    expect(calls).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(abortWatchers(stop.signal)).toBe(0);
  });

  it('forgets a callback once its wait ends, keeps the others, and leaves the signal with the last one', () => {
    const stop = new AbortController();
    const called: string[] = [];
    const fn = () => called.push('twice watched');
    const endFirst = onAbort(stop.signal, fn);
    onAbort(stop.signal, fn);
    const endOther = onAbort(stop.signal, () => called.push('other'));
    endFirst();
    endOther();
    endOther(); // ending twice is harmless
    expect(abortWatchers(stop.signal)).toBe(1);
    stop.abort();
    expect(called).toEqual(['twice watched']);
    const later = new AbortController();
    const ends = [onAbort(later.signal, fn), onAbort(later.signal, fn)];
    expect(getEventListeners(later.signal, 'abort')).toHaveLength(1);
    for (const end of ends) end();
    expect(getEventListeners(later.signal, 'abort')).toHaveLength(0);
    expect(abortWatchers(later.signal)).toBe(0);
    // Watched again after that: a new listener, called as before.
    onAbort(later.signal, fn);
    later.abort();
    expect(called).toEqual(['twice watched', 'twice watched']);
  });

  it('does not watch a signal that is aborted already', () => {
    const signal = AbortSignal.abort();
    const fn = vi.fn();
    onAbort(signal, fn)();
    expect(fn).not.toHaveBeenCalled();
    expect(abortWatchers(signal)).toBe(0);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

describe('sleep and aborted', () => {
  withFakeTimers();

  it('share one listener however many wait, and leave no watch or listener behind when the time passes', async () => {
    const stop = new AbortController();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const sleeps = Array.from({ length: 50 }, (_, i) => sleep(100 + i, asyncScheduler, stop.signal));
      expect(abortWatchers(stop.signal)).toBe(50);
      expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(200);
      await Promise.all(sleeps);
      expect(abortWatchers(stop.signal)).toBe(0);
      expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });

  it('end every wait at once on abort, and leave no watch or timer behind', async () => {
    const stop = new AbortController();
    let ended = 0;
    const waits = [
      ...Array.from({ length: 5 }, () => sleep(60_000, asyncScheduler, stop.signal)),
      aborted(stop.signal),
      aborted(stop.signal),
    ].map((wait) => wait.then(() => ended++));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(ended).toBe(0);
    stop.abort();
    await Promise.all(waits);
    expect(ended).toBe(7);
    expect(abortWatchers(stop.signal)).toBe(0);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('resolve at once on a signal aborted already', async () => {
    const signal = AbortSignal.abort();
    await sleep(60_000, asyncScheduler, signal);
    await aborted(signal);
    expect(abortWatchers(signal)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
