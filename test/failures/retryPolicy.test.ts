import { lastValueFrom, VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { policyBackoffMs as backoffMs, resolveRetryPolicy } from '../../src/failures/RetryPolicy.js';
import { retryWithPolicy } from '../../src/failures/retryWithPolicy.js';
import { InvalidOptionsError } from '../../src/errors/index.js';

describe('RetryPolicy', () => {
  it.each([
    [{ attempts: 0 }, 'retry.attempts'],
    [{ attempts: 1.5 }, 'retry.attempts'],
    [{ initialBackoffMs: -1 }, 'retry.initialBackoffMs'],
    [{ initialBackoffMs: 500, maxBackoffMs: 100 }, 'retry.maxBackoffMs'],
    [{ backoffFactor: 0.5 }, 'retry.backoffFactor'],
    [{ jitter: 2 }, 'retry.jitter'],
    [{ retryable: 'yes' }, 'retry.retryable'],
  ])('rejects %j naming %s', (policy, option) => {
    expect(() => resolveRetryPolicy(policy as never)).toThrow(InvalidOptionsError);
    expect(() => resolveRetryPolicy(policy as never)).toThrow(option);
  });

  it('backs off exponentially, capped, spread by jitter within its fraction', () => {
    const p = resolveRetryPolicy({ initialBackoffMs: 100, maxBackoffMs: 1_000, jitter: 0 });
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(p, n, () => 0.5))).toEqual([100, 200, 400, 800, 1_000]);
    const j = resolveRetryPolicy({ initialBackoffMs: 100, jitter: 0.2 });
    expect(backoffMs(j, 1, () => 0)).toBe(80);
    expect(backoffMs(j, 1, () => 0.999999)).toBe(120);
  });
});

describe('retryWithPolicy', () => {
  const run = <R>(work: (attempt: number) => Promise<R>, policy: Parameters<typeof resolveRetryPolicy>[0]) => {
    const scheduler = new VirtualTimeScheduler();
    const waits: number[] = [];
    let last = 0;
    const outcome = lastValueFrom(
      retryWithPolicy(
        (n) => {
          waits.push(scheduler.now() - last);
          last = scheduler.now();
          return work(n);
        },
        resolveRetryPolicy({ jitter: 0, ...policy }),
        { scheduler },
      ),
    );
    const flush = async () => {
      for (let i = 0; i < 20; i++) {
        await Promise.resolve();
        await new Promise((r) => setImmediate(r));
        scheduler.flush();
      }
    };
    return { outcome, flush, waits };
  };

  it('succeeds on the third attempt after two failures, waiting the backoff between them', async () => {
    const { outcome, flush, waits } = run(async (n) => {
      if (n < 3) throw new Error(`fail ${n}`);
      return 'done';
    }, { attempts: 3, initialBackoffMs: 100 });
    await flush();
    expect(await outcome).toEqual({ ok: true, value: 'done', attempts: 3 });
    expect(waits).toEqual([0, 100, 200]);
  });

  it('gives up after the last attempt with the last error', async () => {
    const { outcome, flush } = run(async (n) => {
      throw new Error(`fail ${n}`);
    }, { attempts: 2 });
    await flush();
    const result = await outcome;
    expect(result).toMatchObject({ ok: false, attempts: 2 });
    expect((result as { error: Error }).error.message).toBe('fail 2');
  });

  it('gives up at once on an error the classifier says is never worth retrying', async () => {
    const { outcome, flush } = run(async () => {
      throw new SyntaxError('malformed');
    }, { attempts: 5, retryable: (e) => !(e instanceof SyntaxError) });
    await flush();
    expect(await outcome).toMatchObject({ ok: false, attempts: 1 });
  });
});
