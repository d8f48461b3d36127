import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { abortWatchers } from '../../src/internal/abortWatch.js';
import { sleepTogether } from '../../src/internal/sleepTogether.js';

/** Lets the promise reactions of what just resolved run. */
const ticks = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('sleepTogether', () => {
  it('sleeps due at the same time share one scheduler action, woken in the order they began, each at its due time', async () => {
    const scheduler = new VirtualTimeScheduler();
    const signal = new AbortController().signal;
    const woken: string[] = [];
    void sleepTogether(100, scheduler, signal).then(() => woken.push(`a@${scheduler.now()}`));
    void sleepTogether(100, scheduler, signal).then(() => woken.push(`b@${scheduler.now()}`));
    void sleepTogether(50, scheduler, signal).then(() => woken.push(`c@${scheduler.now()}`));
    void sleepTogether(100, scheduler, signal).then(() => woken.push(`d@${scheduler.now()}`));
    // a and b share one; c is due earlier (its own); d follows c, so it does not join a's group (one group per scheduler is open to joiners).
    expect(scheduler.actions).toHaveLength(3);
    expect(abortWatchers(signal)).toBe(4);
    scheduler.maxFrames = 99;
    scheduler.flush();
    await ticks();
    expect(woken).toEqual(['c@50']);
    scheduler.maxFrames = 100;
    scheduler.flush();
    await ticks();
    expect(woken).toEqual(['c@50', 'a@100', 'b@100', 'd@100']);
    expect(abortWatchers(signal)).toBe(0);
  });

  it('an abort ends only its own sleep; the shared action is cancelled with the last one', async () => {
    const scheduler = new VirtualTimeScheduler();
    const first = new AbortController();
    const second = new AbortController();
    const woken: string[] = [];
    void sleepTogether(100, scheduler, first.signal).then(() => woken.push(`first@${scheduler.now()}`));
    void sleepTogether(100, scheduler, second.signal).then(() => woken.push(`second@${scheduler.now()}`));
    expect(scheduler.actions).toHaveLength(1);
    first.abort();
    await ticks();
    expect(woken).toEqual(['first@0']);
    expect(scheduler.actions.filter((a) => !a.closed)).toHaveLength(1);
    second.abort();
    await ticks();
    expect(woken).toEqual(['first@0', 'second@0']);
    expect(scheduler.actions.filter((a) => !a.closed)).toHaveLength(0);
    // A sleep after them starts a group of its own.
    void sleepTogether(100, scheduler, new AbortController().signal).then(() => woken.push(`third@${scheduler.now()}`));
    scheduler.flush();
    await ticks();
    expect(woken).toEqual(['first@0', 'second@0', 'third@100']);
  });

  it('resolves at once on an aborted signal, and a sleep after a group fired starts a new one', async () => {
    const scheduler = new VirtualTimeScheduler();
    const aborted = new AbortController();
    aborted.abort();
    await sleepTogether(100, scheduler, aborted.signal);
    expect(scheduler.actions).toHaveLength(0);
    const signal = new AbortController().signal;
    const woken: number[] = [];
    void sleepTogether(0, scheduler, signal).then(() => woken.push(scheduler.now()));
    scheduler.flush();
    void sleepTogether(0, scheduler, signal).then(() => woken.push(scheduler.now()));
    expect(scheduler.actions).toHaveLength(1);
    scheduler.flush();
    await ticks();
    expect(woken).toEqual([0, 0]);
  });
});
