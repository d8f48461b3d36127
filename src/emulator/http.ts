import type { IncomingMessage } from 'node:http';
import { CosmosHttpError } from './errors.js';
import type { PartitionKeyComponent } from './hash.js';
import { parsePartitionKeyHeader } from './store/partitionKeys.js';
import type { Doc } from './store/types.js';

/** An answer before it is written: status, JSON body (or none), headers and its request charge. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** RU, or how to compute it from the size of the body as sent (bytes). Default: 1 on success, 0 on error. */
  charge?: number | ((bodyBytes: number) => number);
}

/** Request headers as Node parses them. */
export type Headers = IncomingMessage['headers'];

/** One header's value (the first, when repeated). */
export function header(h: Headers, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Whether a header says `true` (any case). */
export function isTrue(v: string | undefined): boolean {
  return v !== undefined && v.toLowerCase() === 'true';
}

/** Whether a POST carries a SQL query (the SDK sets both signals; either is enough). */
export function isQuery(h: Headers): boolean {
  return isTrue(header(h, 'x-ms-documentdb-isquery')) || (header(h, 'content-type') ?? '').includes('query+json');
}

/** Splits and decodes the path; ids arrive percent-encoded. */
export function segmentsOf(url: string): string[] {
  const path = url.split('?')[0] ?? '';
  return path
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
}

/** Reads a request's body as sent. */
export async function readRaw(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length === 0 ? undefined : Buffer.concat(chunks);
}

/** Parses a JSON body; `undefined` when there is none. */
export function parseBody(raw: string | Uint8Array | undefined): unknown {
  if (raw === undefined) return undefined;
  const text = typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new CosmosHttpError(400, 'the request body is not valid JSON');
  }
}

/** A feed of resources (`{_rid, <key>: [...], _count}`). */
export function feed(key: string, rid: string, items: Doc[]): Reply {
  return { status: 200, body: { _rid: rid, [key]: items, _count: items.length }, headers: { 'x-ms-item-count': String(items.length) } };
}

/** One resource with its etag. */
export function resource(status: number, doc: Doc, charge?: Reply['charge']): Reply {
  return { status, body: doc, headers: { etag: String(doc['_etag']) }, ...(charge !== undefined ? { charge } : {}) };
}

/** The body as a JSON object, or 400. */
export function asDoc(body: unknown): Doc {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new CosmosHttpError(400, 'the body must be a JSON object');
  return body as Doc;
}

/** The partition key header, parsed; `undefined` when not sent. */
export function partitionKeyOf(h: Headers): PartitionKeyComponent[] | undefined {
  const raw = header(h, 'x-ms-documentdb-partitionkey');
  return raw === undefined ? undefined : parsePartitionKeyHeader(raw);
}

/** `If-Match` as a write condition. */
export function conditions(h: Headers): { ifMatch?: string } {
  const ifMatch = header(h, 'if-match');
  return ifMatch === undefined ? {} : { ifMatch };
}

/** `x-ms-max-item-count` when positive, else `fallback`. */
export function maxItems(h: Headers, fallback: number): number {
  const n = Number(header(h, 'x-ms-max-item-count'));
  return Number.isInteger(n) && n > 0 ? n : fallback;
}
