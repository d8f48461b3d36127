import { CosmosHttpError } from '../errors.js';
import type { PartitionKeyComponent, PartitionKeyDefinition } from '../hash.js';
import type { Doc } from './types.js';

const DEFAULT_PARTITION_KEY_PATH = '/_partitionKey';

/** Stable text for a partition key value, used to compare keys and to key documents. */
export function partitionKeyText(pk: readonly PartitionKeyComponent[]): string {
  return JSON.stringify(pk.map((v) => (v === undefined ? {} : v)));
}

/** A test for "this key, or a key under this hierarchical prefix" (a shorter key compares only its levels). */
export function partitionKeyMatcher(wanted: readonly PartitionKeyComponent[]): (pk: readonly PartitionKeyComponent[]) => boolean {
  const text = partitionKeyText(wanted);
  return (pk) => partitionKeyText(pk.slice(0, wanted.length)) === text;
}

/** The key a document is stored under in its container: partition key and id. */
export function docKey(pk: readonly PartitionKeyComponent[], id: string): string {
  return `${partitionKeyText(pk)}\u0000${id}`;
}

/** Splits a partition key path (`/a/b`, `/"odd name"/c`) into property names. */
function pathSegments(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((s) => (s.startsWith('"') && s.endsWith('"') && s.length >= 2 ? s.slice(1, -1) : s));
}

/** The partition key value of a document under a definition; a missing property is "none" (`undefined`). */
export function extractPartitionKey(doc: Doc, definition: PartitionKeyDefinition): PartitionKeyComponent[] {
  return definition.paths.map((p) => {
    let v: unknown = doc;
    for (const seg of pathSegments(p)) {
      if (v === null || typeof v !== 'object') return undefined;
      v = (v as Record<string, unknown>)[seg];
    }
    if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
    return undefined;
  });
}

/** Reads the JSON array of the `x-ms-documentdb-partitionkey` header; `{}` means "none". */
export function parsePartitionKeyHeader(header: string): PartitionKeyComponent[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(header);
  } catch {
    throw new CosmosHttpError(400, `x-ms-documentdb-partitionkey is not JSON: ${header}`);
  }
  if (!Array.isArray(parsed)) throw new CosmosHttpError(400, 'x-ms-documentdb-partitionkey must be a JSON array');
  return parsed.map((v: unknown) => {
    if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
    if (v !== null && typeof v === 'object' && Object.keys(v).length === 0) return undefined;
    throw new CosmosHttpError(400, `partition key component ${JSON.stringify(v)} is not a string, number, boolean or null`);
  });
}

/** A container's partition key definition as the service completes it (kind, version), or 400 for a bad one. */
export function normalizePartitionKey(raw: unknown, defaultVersion: 1 | 2): PartitionKeyDefinition {
  if (raw === undefined || raw === null) return { paths: [DEFAULT_PARTITION_KEY_PATH], kind: 'Hash', version: defaultVersion };
  const def = raw as Partial<PartitionKeyDefinition>;
  if (!Array.isArray(def.paths) || def.paths.length === 0 || def.paths.some((p) => typeof p !== 'string' || !p.startsWith('/'))) {
    throw new CosmosHttpError(400, 'partitionKey.paths must be a non-empty array of paths starting with "/"');
  }
  const kind = def.kind ?? (def.paths.length > 1 ? 'MultiHash' : 'Hash');
  if (kind === 'Hash' && def.paths.length > 1) {
    throw new CosmosHttpError(400, 'a Hash partition key has exactly one path; use kind "MultiHash" for more');
  }
  const version = kind === 'MultiHash' ? 2 : (def.version ?? defaultVersion);
  return { ...def, paths: def.paths, kind, version };
}
