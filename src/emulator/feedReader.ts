import { countBefore } from '../internal/countBefore.js';
import type { PartitionKeyDefinition } from './hash.js';
import type { Doc, LogEntry, RangeState } from './store/Store.js';

/** `A-IM` value of the LatestVersion mode. */
export const LATEST_VERSION = 'Incremental Feed';
/** `A-IM` value of the AllVersionsAndDeletes mode. */
export const ALL_VERSIONS_AND_DELETES = 'Full-Fidelity Feed';

/** Where a change feed read starts in a range's log. */
export type StartPosition =
  | { kind: 'beginning' }
  | { kind: 'now' }
  | { kind: 'afterLsn'; lsn: number }
  | { kind: 'time'; sinceMs: number };

/** One page of a range's change feed, or nothing new. */
export interface ChangePage {
  entries: LogEntry[];
  /** The LSN to resume after: the last entry's when the page was cut short, else the range's current LSN. */
  continuationLsn: number;
}

/** Reads the `If-None-Match` / `If-Modified-Since` pair the SDK sends; `If-None-Match` wins when both come. */
export function parseStart(ifNoneMatch: string | undefined, ifModifiedSince: string | undefined): StartPosition | 'invalid' {
  if (ifNoneMatch === '*') return { kind: 'now' };
  if (ifNoneMatch !== undefined && ifNoneMatch !== '') {
    const lsn = Number(ifNoneMatch.replace(/^W\//, '').replace(/"/g, ''));
    return Number.isInteger(lsn) && lsn >= 0 ? { kind: 'afterLsn', lsn } : 'invalid';
  }
  if (ifModifiedSince !== undefined && ifModifiedSince !== '') {
    const sinceMs = Date.parse(ifModifiedSince);
    return Number.isNaN(sinceMs) ? 'invalid' : { kind: 'time', sinceMs };
  }
  return { kind: 'beginning' };
}

/** The etag that stands for "after this LSN"; quoted, like the service's. */
export function lsnEtag(lsn: number): string {
  return `"${lsn}"`;
}

function firstAfter(log: readonly LogEntry[], lsn: number): number {
  return countBefore(log, (e) => e.lsn <= lsn);
}

/**
 * Reads up to `maxItems` changes of one range from `start`, keeping those `accept` admits (EPK sub-range or
 * partition key). LatestVersion skips entries a later write to the same document superseded, and deletes;
 * AllVersionsAndDeletes keeps every entry. A page never ends inside a run of equal LSNs (possible in a merged
 * range), because the continuation means "everything after this LSN".
 */
export function readChanges(
  range: RangeState,
  start: StartPosition,
  allVersions: boolean,
  maxItems: number,
  accept: (e: LogEntry) => boolean,
): ChangePage {
  const log = range.log;
  let i: number;
  if (start.kind === 'now') return { entries: [], continuationLsn: range.lsn };
  if (start.kind === 'afterLsn') i = firstAfter(log, start.lsn);
  else if (start.kind === 'time') {
    i = log.findIndex((e) => e.timestampMs >= start.sinceMs);
    if (i < 0) i = log.length;
  } else i = 0;
  const entries: LogEntry[] = [];
  for (; i < log.length; i++) {
    const e = log[i]!;
    if (entries.length >= maxItems && e.lsn !== entries[entries.length - 1]!.lsn) {
      return { entries, continuationLsn: entries[entries.length - 1]!.lsn };
    }
    if (!accept(e)) continue;
    if (!allVersions && (e.op === 'delete' || range.latest.get(e.key) !== e.lsn)) continue;
    entries.push(e);
  }
  return { entries, continuationLsn: range.lsn };
}

function seconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/** A change in the AllVersionsAndDeletes wire format (2021-09-15): `{current, metadata}`, plus `previous` on deletes. */
export function allVersionsItem(e: LogEntry, definition: PartitionKeyDefinition): Doc {
  const metadata: Doc = {
    operationType: e.op,
    lsn: e.lsn,
    crts: seconds(e.timestampMs),
    previousImageLSN: e.previousLsn ?? 0,
    timeToLiveExpired: e.ttlExpired,
  };
  if (e.op === 'delete') {
    metadata['id'] = e.id;
    metadata['partitionKey'] = Object.fromEntries(definition.paths.map((p, i) => [p.slice(1), e.pk[i] ?? null]));
  }
  const item: Doc = { current: e.current ? servedCopy(e.current, e.lsn) : {}, metadata };
  // The service documents the previous image for deletes only; replaces carry just previousImageLSN.
  if (e.op === 'delete' && e.previous) item['previous'] = servedCopy(e.previous, e.previousLsn);
  return item;
}

/** A change in the LatestVersion wire format: the document as written, plus its `_lsn`. */
export function latestVersionItem(e: LogEntry): Doc {
  return servedCopy(e.current ?? {}, e.lsn);
}

/** The copy of a stored document the change feed serves: the only place `_lsn` appears, as in the service. */
function servedCopy(doc: Doc, lsn: number | undefined): Doc {
  return lsn === undefined ? doc : { ...doc, _lsn: lsn };
}
