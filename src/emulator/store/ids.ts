import { randomUUID } from 'node:crypto';

/** Big-endian bytes of unsigned 32-bit integers: the building blocks of `_rid`s. */
export function ridBytes(...ints: number[]): Buffer {
  const b = Buffer.alloc(ints.length * 4);
  ints.forEach((n, i) => b.writeUInt32BE(n >>> 0, i * 4));
  return b;
}

/** A `_rid` as the service writes it: base64 of its bytes. */
export function toRid(b: Buffer): string {
  return b.toString('base64');
}

/** A fresh quoted etag. */
export function newEtag(): string {
  return `"${randomUUID()}"`;
}

/** Epoch seconds (`_ts`) of an epoch-ms time. */
export function seconds(ms: number): number {
  return Math.floor(ms / 1000);
}
