/**
 * A 32-bit hash of a string: FNV-1a, finished with murmur3's avalanche (FNV alone leaves short, similar
 * strings correlated in the high bits). Deterministic across processes, so hosts agree on it.
 */
export function hashString(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return fmix32(hash);
}

/** Murmur3's 32-bit finalizer (its avalanche): mixes every bit of `h` into every bit of the result. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Mulberry32: a small seedable PRNG in [0, 1), so random runs (faults, shuffles) can be replayed by seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
