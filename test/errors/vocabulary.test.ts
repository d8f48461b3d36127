import { describe, expect, it } from 'vitest';
import { classifyAmqpError } from '../../src/amqp/publishToAmqp.js';
import { errorKind, fatalCloseReason, isFatal, readFailureKind } from '../../src/errors/classify.js';
import { CorruptLeaseError, CredentialsError, HandlerError, InvalidOptionsError, ResourceGoneError, TransientError, ViewFencedError } from '../../src/errors/index.js';
import { abortError, isAbortError } from '../../src/internal/abortWatch.js';
import { backoffMs } from '../../src/internal/backoff.js';
import { classifyNatsError } from '../../src/nats/publishToJetStream.js';

// One failure vocabulary: each question about a failure has one answer, in src/errors/classify.ts.
describe('the failure vocabulary', () => {
  it('names the kind of an error event, and the close reason of a failure that ends the processor', () => {
    expect(errorKind(new HandlerError('0', undefined, new Error('x')))).toBe('item');
    expect(errorKind(new ViewFencedError('0', 3, 4))).toBe('fencing');
    expect(errorKind(new CorruptLeaseError('l1', 'bad json'))).toBe('corrupt');
    expect(errorKind(new TransientError('503'))).toBe('infrastructure');
    expect([new CredentialsError(401), new ResourceGoneError('dbs/x'), new InvalidOptionsError('mode', 'x'), new TransientError('503')].map(fatalCloseReason)).toEqual([
      'Unauthorized',
      'ResourceGone',
      'Error',
      undefined,
    ]);
    expect(isFatal(new TransientError('503'))).toBe(false);
  });

  it('says what a failed read was from the status a source reported', () => {
    const read = (status: number | undefined, message = 'failed') => readFailureKind(new TransientError(message, status === undefined ? {} : { statusCode: status }));
    expect([read(429), read(408), read(503), read(500), read(undefined), read(undefined, 'request timed out')]).toEqual(['throttled', 'timeout', 'unavailable', 'unavailable', 'network', 'timeout']);
    expect(readFailureKind(new Error('boom'))).toBe('other');
  });

  it('places broker refusals as transient or permanent', () => {
    expect(classifyNatsError(Object.assign(new Error('maximum messages exceeded'), { name: 'JetStreamApiError' }))).toBe('transient');
    expect(classifyNatsError(new Error('no stream matches subject'))).toBe('permanent');
    expect(classifyAmqpError(Object.assign(new Error('Channel closed by server: 404 (NOT-FOUND)'), { code: 404 }))).toBe('permanent');
    expect(classifyAmqpError(Object.assign(new Error('write ECONNRESET'), { code: 'ECONNRESET' }))).toBe('transient');
  });

  it('has one abort error: the signal reason, else an AbortError', () => {
    const plain = new AbortController();
    plain.abort();
    expect(isAbortError(abortError(plain.signal))).toBe(true);
    const reasoned = new AbortController();
    const reason = new Error('stopped');
    reasoned.abort(reason);
    expect(abortError(reasoned.signal)).toBe(reason);
  });
});

describe('the one backoff', () => {
  it('doubles from the first wait up to the bound, which holds with the jitter too', () => {
    expect([1, 2, 3, 8, 30, 2_000].map((n) => backoffMs({ initialMs: 100, maxMs: 10_000 }, n))).toEqual([100, 200, 400, 10_000, 10_000, 10_000]);
    // At the cap, +20 % jitter would go above the bound: the bound wins (a relay's maxMs is "upper bound of one wait").
    expect(backoffMs({ initialMs: 100, maxMs: 1_000, jitter: 0.2 }, 10, () => 0.999)).toBe(1_000);
    expect(backoffMs({ initialMs: 100, maxMs: 1_000, jitter: 0.2 }, 1, () => 0)).toBe(80);
    expect(backoffMs({ initialMs: 0, maxMs: 1_000 }, 5_000)).toBe(0);
  });

  it('draws from the random stream whenever given one, so a seeded stream advances alike with or without jitter', () => {
    let draws = 0;
    const random = () => (draws++, 0.5);
    backoffMs({ initialMs: 100, maxMs: 1_000 }, 1, random);
    backoffMs({ initialMs: 100, maxMs: 1_000, jitter: 0.2 }, 1, random);
    expect(draws).toBe(2);
  });
});
