import { describe, expect, it } from 'vitest';
import { RateMeter } from '../../src/feed/reader/RateMeter.js';

describe('RateMeter', () => {
  it('reports changes per second once per window, each new window weighing half', () => {
    const meter = new RateMeter(0, 10_000);
    expect(meter.add(50, 5_000)).toBeUndefined();
    expect(meter.add(50, 10_000)).toBe(10); // 100 changes in 10 s
    expect(meter.add(0, 15_000)).toBeUndefined();
    expect(meter.add(300, 20_000)).toBe(20); // (10 + 30) / 2
    expect(meter.add(0, 30_000)).toBe(10); // a quiet window halves it
  });
});
