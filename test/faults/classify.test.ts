/** One classifier for every failure rxfeed meets: fencing, transient (waited out) or permanent (ends the stream). */
import { describe, expect, it } from 'vitest';
import {
  classifyFailure,
  CredentialsError,
  DeadLetterFencedError,
  fencingError,
  HandlerError,
  InvalidOptionsError,
  LeaseLostError,
  TransientError,
  ViewFencedError,
} from '../../src/index.js';

const coded = (code: string, message = code) => Object.assign(new Error(message), { code });

describe('classifyFailure', () => {
  it('calls fencing errors fencing, also inside a HandlerError or a cause chain', () => {
    const fenced = new ViewFencedError('0', 1, 2);
    for (const e of [new LeaseLostError('0', 'a'), fenced, new DeadLetterFencedError('0', 1, 2), new HandlerError('0', undefined, fenced), new Error('wrapped', { cause: fenced })]) {
      expect(classifyFailure(e)).toBe('fencing');
    }
    expect(fencingError(new HandlerError('0', undefined, fenced))).toBe(fenced);
    expect(fencingError(new Error('x'))).toBeUndefined();
  });

  it('calls what waiting can fix transient', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', '40001', '40P01', '57P01', '53300', '08006', '08001']) {
      expect([code, classifyFailure(coded(code))]).toEqual([code, 'transient']);
    }
    expect(classifyFailure(new Error('Connection terminated unexpectedly'))).toBe('transient');
    expect(classifyFailure(new TransientError('throttled', { statusCode: 429 }))).toBe('transient');
    expect(classifyFailure(Object.assign(new Error('busy'), { statusCode: 503 }))).toBe('transient');
    expect(classifyFailure(new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')]))).toBe('transient');
    // A store rxfeed does not know failing with a plain Error is waited out (loudly), not fatal.
    expect(classifyFailure(new Error('view write failed'))).toBe('transient');
  });

  it('calls what waiting cannot fix permanent', () => {
    for (const code of ['28P01', '28000', '42P01', '42601', '3D000', '22P02', '23505', 'ENOTFOUND']) {
      expect([code, classifyFailure(coded(code))]).toEqual([code, 'permanent']);
    }
    expect(classifyFailure(new CredentialsError(401))).toBe('permanent');
    expect(classifyFailure(new InvalidOptionsError('x', 'bad'))).toBe('permanent');
    expect(classifyFailure(new TypeError('x is not a function'))).toBe('permanent');
    expect(classifyFailure(Object.assign(new Error('forbidden'), { statusCode: 403 }))).toBe('permanent');
    expect(classifyFailure(new HandlerError('0', undefined, coded('42P01')))).toBe('permanent');
  });
});
