import { createRequire } from 'node:module';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  effectivePartitionKey,
  evenBoundaries,
  midpoint,
  type PartitionKeyComponent,
  type PartitionKeyDefinition,
} from '../../src/emulator/hash.js';
import { seededRandom } from '../../src/emulator/faults.js';

type SdkHash = (key: unknown[], def: PartitionKeyDefinition) => string;

// The SDK's own hashing module is internal (not in its exports), so it is loaded by path, in tests only.
let sdkHash: SdkHash;
beforeAll(async () => {
  const require = createRequire(import.meta.url);
  const dir = path.dirname(require.resolve('@azure/cosmos'));
  ({ hashPartitionKey: sdkHash } = (await import(path.join(dir, 'utils/hashing/hash.js'))) as { hashPartitionKey: SdkHash });
});

const V1: PartitionKeyDefinition = { paths: ['/pk'], kind: 'Hash' };
const V2: PartitionKeyDefinition = { paths: ['/pk'], kind: 'Hash', version: 2 };
const MULTI: PartitionKeyDefinition = { paths: ['/a', '/b', '/c'], kind: 'MultiHash', version: 2 };

function sampleKeys(): PartitionKeyComponent[] {
  const rnd = seededRandom(42);
  const keys: PartitionKeyComponent[] = ['', 'a', 'p3', 'café', '日本語', '🙂 emoji', 'x'.repeat(150), 'y'.repeat(100), 'z'.repeat(101)];
  keys.push(0, -0, 1, -1, 3.14, 1e300, -1e-300, 2 ** 53, 2 ** 32, Number.MAX_VALUE, true, false, null, undefined);
  for (let i = 0; i < 200; i++) {
    const len = Math.floor(rnd() * 40);
    keys.push(Array.from({ length: len }, () => String.fromCharCode(32 + Math.floor(rnd() * 300))).join(''));
    keys.push(Math.floor(rnd() * 1e9) / (i % 3 === 0 ? 7 : 1));
  }
  return keys;
}

describe('effectivePartitionKey', () => {
  it('matches the SDK bit for bit under V1, V2 and MultiHash (including prefixes)', () => {
    const keys = sampleKeys();
    for (const k of keys) {
      // The SDK encodes the "none" key as {} on the wire and hashes it the same as undefined.
      const sdkKey = k === undefined ? {} : k;
      expect(effectivePartitionKey([k], V1), `V1 ${JSON.stringify(k)}`).toBe(sdkHash([sdkKey], V1));
      expect(effectivePartitionKey([k], V2), `V2 ${JSON.stringify(k)}`).toBe(sdkHash([sdkKey], V2));
      expect(effectivePartitionKey([k, 'tenant', 7], MULTI)).toBe(sdkHash([sdkKey, 'tenant', 7], MULTI));
      expect(effectivePartitionKey([k], MULTI), 'prefix').toBe(sdkHash([sdkKey], MULTI));
    }
  });

  it('keeps V2 keys inside 00…3F, 32 hex characters a level', () => {
    for (const k of sampleKeys()) {
      const epk = effectivePartitionKey([k], V2);
      expect(epk).toMatch(/^[0-3][0-9A-F]{31}$/);
      expect(effectivePartitionKey([k, k], MULTI)).toHaveLength(64);
    }
  });
});

describe('evenBoundaries', () => {
  it('cuts the V2 domain into shares that each get a fair part of the keys', () => {
    const cuts = evenBoundaries(4, V2);
    expect(cuts).toEqual(['10000000000000000000000000000000', '20000000000000000000000000000000', '30000000000000000000000000000000']);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) {
      const epk = effectivePartitionKey([`key-${i}`], V2);
      counts[cuts.filter((c) => epk >= c).length]!++;
    }
    for (const n of counts) expect(n).toBeGreaterThan(800);
  });

  it('cuts the V1 domain by hash value, keeping string order', () => {
    const cuts = evenBoundaries(3, V1);
    expect([...cuts].sort()).toEqual(cuts);
    const counts = [0, 0, 0];
    for (let i = 0; i < 3000; i++) {
      const epk = effectivePartitionKey([`key-${i}`], V1);
      counts[cuts.filter((c) => epk >= c).length]!++;
    }
    for (const n of counts) expect(n).toBeGreaterThan(800);
  });

  it("cuts V1 where the service's partition key ranges start (published pkranges of 2 and 9 ranges)", () => {
    expect(evenBoundaries(2, V1)).toEqual(['05C1DFFFFFFFFC']);
    expect(evenBoundaries(9, V1)).toEqual([
      '05C1BD3971E3C0',
      '05C1CD3971E3C0',
      '05C1D5AB55AB50',
      '05C1DD3971E3C0',
      '05C1E1E3C78F18',
      '05C1E5AB55AB50',
      '05C1E971E3C788',
      '05C1ED3971E3C0',
    ]);
  });

  it('cuts three ranges (21,000 to 25,100 RU/s) at thirds of the hash space in both versions', () => {
    expect(evenBoundaries(3, V1)).toEqual(['05C1D5AB55AB54', '05C1E5AB55AB54']);
    expect(evenBoundaries(3, V2)).toEqual(['15555555555555555555555555555555', '2AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']);
  });

  it('gives no cuts for a single range', () => {
    expect(evenBoundaries(1, V2)).toEqual([]);
  });
});

describe('midpoint', () => {
  it('halves a V2 interval and has none for V1', () => {
    expect(midpoint('', 'FF', V2)).toBe('20000000000000000000000000000000');
    expect(midpoint('20000000000000000000000000000000', 'FF', V2)).toBe('30000000000000000000000000000000');
    expect(midpoint('', 'FF', V1)).toBeUndefined();
  });
});
