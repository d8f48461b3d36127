import { fmix32 } from '../internal/random.js';

/**
 * Effective partition key (EPK) hashing, bit for bit what `@azure/cosmos` computes on the client: the SDK
 * hashes keys itself for hierarchical-key prefixes, EPK sub-range reads and bulk, so any difference here would
 * make those reads silently return the wrong documents.
 */

/** A partition key definition as the container resource carries it. */
export interface PartitionKeyDefinition {
  /** The partition key paths, e.g. `['/customerId']` (several for hierarchical keys). */
  paths: string[];
  /** `'Hash'` (default), `'MultiHash'` (hierarchical keys) or `'Range'`. */
  kind?: 'Hash' | 'MultiHash' | 'Range';
  /** Hash version: 2 (default for new containers) or 1. */
  version?: number;
}

/** One component of a partition key value; `undefined` is the "none" key (sent on the wire as `{}`). */
export type PartitionKeyComponent = string | number | boolean | null | undefined;

/** Lowest EPK; every range list starts here. */
export const MIN_EPK = '';
/** Highest EPK (exclusive); every range list ends here. */
export const MAX_EPK = 'FF';

const MASK64 = (1n << 64n) - 1n;
const utf8 = new TextEncoder();

function rotl32(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

/** MurmurHash3, x86 flavour, 32 bits, seed 0. */
export function murmur3x86_32(bytes: Uint8Array): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  let h = 0;
  const tail = bytes.length - (bytes.length % 4);
  const mixK = (k: number): number => Math.imul(rotl32(Math.imul(k, c1), 15), c2);
  for (let i = 0; i < tail; i += 4) {
    const k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    h = Math.imul(rotl32(h ^ mixK(k), 13), 5) + 0xe6546b64;
  }
  let k = 0;
  for (let i = bytes.length - 1; i >= tail; i--) k = (k << 8) | bytes[i]!;
  if (bytes.length > tail) h ^= mixK(k);
  return fmix32(h ^ bytes.length);
}

function rotl64(x: bigint, r: bigint): bigint {
  return ((x << r) | (x >> (64n - r))) & MASK64;
}

function fmix64(k: bigint): bigint {
  k ^= k >> 33n;
  k = (k * 0xff51afd7ed558ccdn) & MASK64;
  k ^= k >> 33n;
  k = (k * 0xc4ceb9fe1a85ec53n) & MASK64;
  return k ^ (k >> 33n);
}

function readLE64(bytes: Uint8Array, from: number, count: number): bigint {
  let v = 0n;
  for (let i = count - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[from + i]!);
  return v;
}

/** MurmurHash3, x64 flavour, 128 bits, seed 0, as the two 64-bit halves `[h1, h2]`. */
export function murmur3x64_128(bytes: Uint8Array): [bigint, bigint] {
  const c1 = 0x87c37b91114253d5n;
  const c2 = 0x4cf5ad432745937fn;
  const mix1 = (k: bigint): bigint => (rotl64((k * c1) & MASK64, 31n) * c2) & MASK64;
  const mix2 = (k: bigint): bigint => (rotl64((k * c2) & MASK64, 33n) * c1) & MASK64;
  let h1 = 0n;
  let h2 = 0n;
  const tail = bytes.length - (bytes.length % 16);
  for (let i = 0; i < tail; i += 16) {
    h1 ^= mix1(readLE64(bytes, i, 8));
    h1 = (((rotl64(h1, 27n) + h2) & MASK64) * 5n + 0x52dce729n) & MASK64;
    h2 ^= mix2(readLE64(bytes, i + 8, 8));
    h2 = (((rotl64(h2, 31n) + h1) & MASK64) * 5n + 0x38495ab5n) & MASK64;
  }
  const rest = bytes.length - tail;
  if (rest > 8) h2 ^= mix2(readLE64(bytes, tail + 8, rest - 8));
  if (rest > 0) h1 ^= mix1(readLE64(bytes, tail, Math.min(rest, 8)));
  const len = BigInt(bytes.length);
  h1 ^= len;
  h2 ^= len;
  h1 = (h1 + h2) & MASK64;
  h2 = (h2 + h1) & MASK64;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 = (h1 + h2) & MASK64;
  h2 = (h2 + h1) & MASK64;
  return [h1, h2];
}

// Type markers of the Cosmos binary encoding.
const PREFIX = { none: 0x00, null: 0x01, false: 0x02, true: 0x03, number: 0x05, string: 0x08, max: 0xff } as const;

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function doubleLE(value: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setFloat64(0, value, true);
  return b;
}

/**
 * The order-preserving binary encoding of a number: a 64-bit key (sign-flipped IEEE bits) written as one full
 * byte and then 7-bit groups, each but the last with its low bit set, trailing zero bytes dropped.
 */
export function encodeNumber(value: number): Uint8Array {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value);
  const raw = view.getBigUint64(0);
  let payload = raw < 1n << 63n ? raw ^ (1n << 63n) : (~raw + 1n) & MASK64;
  const out = [PREFIX.number, Number(payload >> 56n)];
  payload = (payload << 8n) & MASK64;
  let last = 0;
  let first = true;
  do {
    if (!first) out.push(last);
    first = false;
    last = Number(payload >> 56n) | 1;
    payload = (payload << 7n) & MASK64;
  } while (payload !== 0n);
  if ((last & 0xfe) !== 0) out.push(last & 0xfe);
  return Uint8Array.from(out);
}

function scalarPrefix(value: PartitionKeyComponent | object): number {
  if (value === null) return PREFIX.null;
  if (value === true) return PREFIX.true;
  if (value === false) return PREFIX.false;
  return PREFIX.none;
}

const V1_MAX_CHARS = 100;

function v1Epk(value: PartitionKeyComponent | object): string {
  let hashed: Uint8Array;
  let encoded: Uint8Array;
  if (typeof value === 'string') {
    const s = utf8.encode(value.substring(0, V1_MAX_CHARS));
    hashed = concat([Uint8Array.of(PREFIX.string), s, Uint8Array.of(PREFIX.none)]);
    // Each byte is shifted up by one so that 0x00 can terminate the string.
    encoded = concat([Uint8Array.of(PREFIX.string), s.map((b) => (b < 0xff ? b + 1 : b)), Uint8Array.of(PREFIX.none)]);
  } else if (typeof value === 'number') {
    hashed = concat([Uint8Array.of(PREFIX.number), doubleLE(value)]);
    encoded = encodeNumber(value);
  } else {
    hashed = encoded = Uint8Array.of(scalarPrefix(value));
  }
  return toHex(concat([encodeNumber(murmur3x86_32(hashed)), encoded]));
}

function v2Bytes(value: PartitionKeyComponent | object): Uint8Array {
  if (typeof value === 'string') return concat([Uint8Array.of(PREFIX.string), utf8.encode(value), Uint8Array.of(PREFIX.max)]);
  if (typeof value === 'number') return concat([Uint8Array.of(PREFIX.number), doubleLE(value)]);
  return Uint8Array.of(scalarPrefix(value));
}

function v2Epk(values: readonly (PartitionKeyComponent | object)[]): string {
  const [h1, h2] = murmur3x64_128(concat(values.map(v2Bytes)));
  // Cosmos writes h2 then h1 big-endian and clears the top two bits.
  const hex = ((h2 << 64n) | h1).toString(16).padStart(32, '0').toUpperCase();
  return (parseInt(hex.slice(0, 2), 16) & 0x3f).toString(16).padStart(2, '0').toUpperCase() + hex.slice(2);
}

function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex').toUpperCase();
}

/**
 * The EPK of a partition key value under a container's definition: V1 (no version or 1), V2, or MultiHash
 * (one V2 hash per level, concatenated; a shorter array is a prefix). `{}` and `undefined` both mean "none".
 * It equals what `@azure/cosmos` computes, so tests can tell which feed range holds a key.
 *
 * @example
 * ```ts
 * const epk = effectivePartitionKey(['tenant-1'], { paths: ['/tenant'], version: 2 }); // 32 hex characters
 * ```
 */
export function effectivePartitionKey(
  values: readonly (PartitionKeyComponent | object)[],
  definition: PartitionKeyDefinition,
): string {
  if (definition.kind === 'MultiHash') return values.map((v) => v2Epk([v])).join('');
  if (definition.version === 2) return v2Epk(values);
  return v1Epk(values[0]);
}

/** True when the definition hashes with V2 (and so EPKs live in `00…` to `3F…`, 32 hex characters a level). */
export function usesV2(definition: PartitionKeyDefinition): boolean {
  return definition.kind === 'MultiHash' || definition.version === 2;
}

const V2_SPAN = 1n << 126n;

/**
 * `count - 1` interior boundaries that cut the hash domain into equal shares, so that the initial ranges get
 * similar numbers of keys. A naive cut of `""…"FF"` would put every V2 key in the first range.
 */
export function evenBoundaries(count: number, definition: PartitionKeyDefinition): string[] {
  const out: string[] = [];
  for (let i = 1; i < count; i++) {
    if (usesV2(definition)) {
      out.push(((V2_SPAN * BigInt(i)) / BigInt(count)).toString(16).padStart(32, '0').toUpperCase());
    } else {
      // V1 EPKs start with the encoded 32-bit hash, and the encoding keeps numeric order. The service cuts at
      // multiples of floor(0xFFFFFFFF / count): its pkranges read 05C1DFFFFFFFFC (2^31 - 1) for two ranges and
      // 05C1BD3971E3C0, 05C1CD3971E3C0, 05C1D5AB55AB50… (477218588 × i) for nine.
      out.push(toHex(encodeNumber(i * Math.floor(0xffffffff / count))));
    }
  }
  return out;
}

/**
 * The middle of `[min, max)` in the V2 domain, used to split a range that holds too few documents to take a
 * median from. Undefined for V1, whose EPKs are not fixed-width numbers.
 */
export function midpoint(min: string, max: string, definition: PartitionKeyDefinition): string | undefined {
  if (!usesV2(definition)) return undefined;
  const lo = min === MIN_EPK ? 0n : BigInt('0x' + min.slice(0, 32).padEnd(32, '0'));
  const hi = max === MAX_EPK ? V2_SPAN : BigInt('0x' + max.slice(0, 32).padEnd(32, '0'));
  if (hi - lo < 2n) return undefined;
  return ((lo + hi) / 2n).toString(16).padStart(32, '0').toUpperCase();
}
