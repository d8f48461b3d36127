import { describe, expect, it } from 'vitest';
import { countBefore } from '../../src/internal/countBefore.js';

describe('countBefore', () => {
  it('is the index of the first item the predicate does not hold for', () => {
    const sorted = [1, 3, 3, 3, 7, 9];
    expect(countBefore(sorted, (n) => n <= 3)).toBe(4);
    expect(countBefore(sorted, (n) => n < 3)).toBe(1);
    expect(countBefore(sorted, (n) => n < 0)).toBe(0);
    expect(countBefore(sorted, (n) => n < 100)).toBe(sorted.length);
    expect(countBefore([], () => true)).toBe(0);
  });

  it('agrees with a linear scan at every cut', () => {
    const sorted = Array.from({ length: 50 }, (_, i) => Math.floor(i / 3));
    for (let cut = -1; cut <= 17; cut++) {
      const linear = sorted.findIndex((n) => !(n <= cut));
      expect(countBefore(sorted, (n) => n <= cut)).toBe(linear < 0 ? sorted.length : linear);
    }
  });
});
