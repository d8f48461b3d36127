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
  // Read on every page: the usual `"42"` without a regular expression or a copy.
  const quoted = position.length > 2 && position.charCodeAt(0) === 34 && position.charCodeAt(position.length - 1) === 34;
  const digits = quoted ? digitsValue(position, 1, position.length - 1) : undefined;
  if (digits !== undefined) return digits;
  const text = position.replace(/^W\//, '').replace(/"/g, '');
  if (!/^\d+$/.test(text)) return undefined;
  return Number(text);
}

/** The number written in `text` from `start` to `end` (exclusive) when that is decimal digits only, else `undefined`. */
function digitsValue(text: string, start: number, end: number): number | undefined {
  if (end <= start) return undefined;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  return Number(text.slice(start, end));
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
  // Read on every page (the token changes with every write): scanned in place, no splitting.
  let best: number | undefined;
  for (let start = 0; start <= sessionToken.length; ) {
    let end = sessionToken.indexOf(',', start);
    if (end < 0) end = sessionToken.length;
    // `<rangeId>:<version>#<globalLsn>[#…]`: the global LSN is the second `#` segment after the colon, or the
    // whole text after the colon when there is no `#`.
    const afterColon = sessionToken.indexOf(':', start);
    const from = afterColon >= 0 && afterColon < end ? afterColon + 1 : start;
    const hash = sessionToken.indexOf('#', from);
    let lsn: number | undefined;
    if (hash >= 0 && hash < end) {
      const next = sessionToken.indexOf('#', hash + 1);
      lsn = digitsValue(sessionToken, hash + 1, next >= 0 && next < end ? next : end);
    } else lsn = digitsValue(sessionToken, from, end);
    if (lsn !== undefined && (best === undefined || lsn > best)) best = lsn;
    start = end + 1;
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

/**
 * A checked continuation token cut around its one etag: the text before the etag's JSON string and the text
 * after it. A later reply of the same iterator whose token is the same text with another etag needs no JSON
 * parse (the token is parsed in full on every page otherwise): see {@link etagOfShape}.
 *
 * @internal
 */
export interface TokenShape {
  readonly prefix: string;
  readonly suffix: string;
}

const ETAG_KEY = '"continuationToken":"';

/** The {@link TokenShape} of a token with exactly one range entry; `undefined` for any other text. @internal */
export function tokenShape(text: string): TokenShape | undefined {
  const at = text.indexOf(ETAG_KEY);
  if (at < 0 || text.indexOf(ETAG_KEY, at + 1) >= 0) return undefined;
  const start = at + ETAG_KEY.length;
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 92) i++; // an escape: skip the escaped character
    else if (c === 34) return { prefix: text.slice(0, start), suffix: text.slice(i) };
  }
  return undefined;
}

/**
 * The etag of `text` when it is the token `shape` was cut from with only the etag changed (same container,
 * same one range, same fields), else `undefined` (parse it in full then).
 *
 * @internal
 */
export function etagOfShape(text: string, shape: TokenShape): string | undefined {
  const { prefix, suffix } = shape;
  if (text.length <= prefix.length + suffix.length || !text.startsWith(prefix) || !text.endsWith(suffix)) return undefined;
  const body = text.slice(prefix.length, text.length - suffix.length);
  // The usual etag, `\"42\"`: read without a parse. Anything else must be one JSON string's content (a quote
  // that is not escaped ends the string early, and the parse fails).
  if (body.length > 4 && body.startsWith('\\"') && body.endsWith('\\"') && digitsValue(body, 2, body.length - 2) !== undefined) {
    return `"${body.slice(2, -2)}"`;
  }
  try {
    const value: unknown = JSON.parse(`"${body}"`);
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}
