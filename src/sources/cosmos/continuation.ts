import type { FeedRange, Position } from '../../core/Partition.js';

/** One entry of the SDK's feed-range continuation token. */
export interface RangeContinuation {
  readonly minInclusive: string;
  readonly maxExclusive: string;
  /** The etag of the range (`"42"`), `""` for the start of the range, `"*"` for "from now". */
  readonly continuationToken: string | null | undefined;
}

/** The feed-range continuation token of `@azure/cosmos` 4.x (see the protocol notes, §6). */
export interface CompositeToken {
  readonly rid: string;
  readonly Continuation: readonly RangeContinuation[];
}

/**
 * The continuation token that makes `getChangeFeedIterator` read exactly `range` from `etag`
 * (`""` = beginning of the range, `"*"` = now). The SDK accepts hand-built tokens as long as `rid` is the
 * container's `_rid`; this is how a lease's stored position is resumed without a frozen SDK FeedRange object.
 *
 * @internal
 */
export function rangeToken(rid: string, range: FeedRange, etag: string): string {
  const token: CompositeToken = {
    rid,
    Continuation: [{ minInclusive: range.minInclusive, maxExclusive: range.maxExclusive, continuationToken: etag }],
  };
  return JSON.stringify(token);
}

/**
 * Parses the SDK's response continuation token. Returns `undefined` for anything that is not a feed-range
 * token (the caller treats that as a protocol surprise).
 *
 * @internal
 */
export function parseToken(text: string | undefined): CompositeToken | undefined {
  if (!text) return undefined;
  try {
    const value = JSON.parse(text) as Partial<CompositeToken>;
    if (typeof value.rid !== 'string' || !Array.isArray(value.Continuation)) return undefined;
    return value as CompositeToken;
  } catch {
    return undefined;
  }
}

/**
 * The LSN a position (an etag such as `"42"`, quoted or not, possibly weak `W/"42"`) stands for, or
 * `undefined` when it does not look like an LSN (the service treats etags as opaque; the emulator and, as far
 * as known, the service use the LSN).
 *
 * @internal
 */
export function lsnOfPosition(position: Position | null | undefined): number | undefined {
  if (!position) return undefined;
  const text = position.replace(/^W\//, '').replace(/"/g, '');
  if (!/^\d+$/.test(text)) return undefined;
  return Number(text);
}

/**
 * The global LSN in a session token, as the .NET estimator reads it: the token of one range is
 * `<rangeId>:<version>#<globalLsn>[#<region>=<lsn>…]`; a composite token joins several with commas (the
 * highest LSN wins). `undefined` when absent or unreadable.
 *
 * @internal
 */
export function lsnOfSessionToken(sessionToken: string | undefined): number | undefined {
  if (!sessionToken) return undefined;
  let best: number | undefined;
  for (const part of sessionToken.split(',')) {
    const afterColon = part.slice(part.indexOf(':') + 1);
    const segments = afterColon.split('#');
    const text = segments.length >= 2 ? segments[1]! : segments[0]!;
    if (!/^\d+$/.test(text)) continue;
    const lsn = Number(text);
    if (best === undefined || lsn > best) best = lsn;
  }
  return best;
}

/**
 * The partition key range id at the front of a session token (`"3:-1#42"` → `"3"`), which tells which
 * physical range answered a request.
 *
 * @internal
 */
export function rangeIdOfSessionToken(sessionToken: string | undefined): string | undefined {
  if (!sessionToken || sessionToken.includes(',')) return undefined;
  const colon = sessionToken.indexOf(':');
  return colon > 0 ? sessionToken.slice(0, colon) : undefined;
}
