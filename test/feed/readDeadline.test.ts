import { describe, expect, it } from 'vitest';
import { TransientError } from '../../src/errors/index.js';
import { ReadDeadline } from '../../src/feed/reader/ReadDeadline.js';
import { VirtualScheduler } from '../leases/virtualScheduler.js';

/** A read that never answers unless aborted (then it rejects with the abort reason, as a source does). */
const hang = (signal: AbortSignal) =>
  new Promise<string>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));

describe('ReadDeadline', () => {
  it('fails a read that never answers exactly at its deadline, with a TransientError, and aborts it', async () => {
    const scheduler = new VirtualScheduler();
    const deadline = new ReadDeadline(scheduler, 1000, new AbortController().signal);
    let signal: AbortSignal | undefined;
    const outcome = deadline.run((s) => ((signal = s), hang(s)), 'partition 7').catch((e: unknown) => e);
    await scheduler.advance(999);
    expect(signal?.aborted).toBe(false);
    await scheduler.advance(1);
    const error = await outcome;
    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toBe('read of partition 7 did not answer within 1000 ms');
    expect(signal?.aborted).toBe(true);
  });

  it('gives each read its own deadline while sharing one timer, and a fresh signal after a timeout', async () => {
    const scheduler = new VirtualScheduler();
    const deadline = new ReadDeadline(scheduler, 1000, new AbortController().signal);
    const signals: AbortSignal[] = [];
    // Quick reads at 0, 300 and 600 ms, then one that hangs from 900 ms: it fails at 1900 ms, not at 1000.
    for (const at of [0, 300, 600]) {
      await scheduler.advance(at - scheduler.now());
      expect(await deadline.run(async (s) => (signals.push(s), 'page'), 'partition 1')).toBe('page');
    }
    await scheduler.advance(900 - scheduler.now());
    let failedAt: number | undefined;
    const outcome = deadline.run((s) => (signals.push(s), hang(s)), 'partition 1').catch((e: unknown) => ((failedAt = scheduler.now()), e));
    await scheduler.advance(1899 - scheduler.now());
    expect(failedAt).toBeUndefined();
    await scheduler.advance(1);
    expect(await outcome).toBeInstanceOf(TransientError);
    expect(failedAt).toBe(1900);
    expect(new Set(signals.slice(0, 4)).size).toBe(1);
    // The next read is not born aborted.
    expect(await deadline.run(async (s) => (signals.push(s), s.aborted ? 'aborted' : 'page'), 'partition 1')).toBe('page');
    deadline.dispose();
  });

  it("leaves a later read's outcome to that read when a timed-out read answers late, with a page or an error", async () => {
    const scheduler = new VirtualScheduler();
    const deadline = new ReadDeadline(scheduler, 1000, new AbortController().signal);
    // Reads that ignore their signal: each answers only when told to, after its deadline.
    const answers: { answer: (page: string) => void; fail: (error: Error) => void }[] = [];
    const late = () =>
      new Promise<string>((answer, fail) => {
        answers.push({ answer, fail });
      });
    const first = deadline.run(late, 'partition 3').catch((e: unknown) => e);
    await scheduler.advance(1000);
    expect(await first).toBeInstanceOf(TransientError);
    const second = deadline.run(late, 'partition 3').catch((e: unknown) => e);
    await scheduler.advance(1000);
    expect(await second).toBeInstanceOf(TransientError);
    const third = deadline.run(late, 'partition 3').then((page) => page, (e: unknown) => e);
    answers[0]!.answer('stale page');
    answers[1]!.fail(new Error('stale failure'));
    await Promise.resolve();
    await Promise.resolve();
    answers[2]!.answer('page');
    expect(await third).toBe('page');
    // The one timer is re-armed for the third read's deadline, which it answered before: nothing fails then.
    await scheduler.advance(1000);
    expect(await deadline.run(async () => 'next', 'partition 3')).toBe('next');
    deadline.dispose();
  });

  it('aborts the read in flight when the outer signal aborts', async () => {
    const scheduler = new VirtualScheduler();
    const outer = new AbortController();
    const deadline = new ReadDeadline(scheduler, 1000, outer.signal);
    const outcome = deadline.run(hang, 'partition 2').catch((e: unknown) => e);
    outer.abort(new Error('lease lost'));
    expect(((await outcome) as Error).message).toBe('lease lost');
    deadline.dispose();
  });
});
