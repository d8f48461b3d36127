import { hashString } from '../../internal/random.js';

/** Hashed keys live in `[0, KEY_END)`; `KEY_END` is written as `'FF'`, the exclusive end of the key space. */
export const KEY_END = 0xff000000;

/** A key-space bound written as feed ranges write it (`''` is the start, `'FF'` the end) as a number. */
export function hexToKey(hex: string): number {
  if (hex === '') return 0;
  if (hex === 'FF') return KEY_END;
  return parseInt(hex, 16);
}

/** A numeric key as feed ranges write it: upper-case hex, `''` for the start, `'FF'` for the end. */
export function keyToHex(key: number): string {
  if (key <= 0) return '';
  if (key >= KEY_END) return 'FF';
  return key.toString(16).toUpperCase().padStart(8, '0');
}

/** FNV-1a over the key's string form, mixed and folded into the key space. */
export function hashKey(value: unknown): number {
  return hashString(typeof value === 'string' ? value : JSON.stringify(value)) % KEY_END;
}
