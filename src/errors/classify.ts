import type { CloseReason, ErrorKind, ReadFailureKind } from '../core/events.js';
import { CorruptLeaseError } from './CorruptLeaseError.js';
import { CredentialsError } from './CredentialsError.js';
import { HandlerError } from './HandlerError.js';
import { InvalidOptionsError } from './InvalidOptionsError.js';
import { LeaseLostError } from './LeaseLostError.js';
import { ResourceGoneError } from './ResourceGoneError.js';
import { TransientError } from './TransientError.js';

/**
 * What a failure means for the work that met it:
 *
 * - `fencing`: this host's ownership of a lease ended (`LeaseLostError`, `ViewFencedError`,
 *   `DeadLetterFencedError`): the work is dropped for the new owner, never retried or dead-lettered;
 * - `transient`: waiting can fix it (connection refused, reset or dropped, a timeout, throttling,
 *   PostgreSQL serialization failure, deadlock, admin shutdown, too many connections): retried with backoff;
 * - `permanent`: waiting cannot fix it (credentials, a missing table or database, bad SQL, bad options, a
 *   programming error): ends the stream with a typed error.
 *
 * An error this cannot place (a plain `Error` from a store rxfeed does not know) counts as transient: a store
 * that is briefly down is waited out, loudly, rather than ending processing for good.
 */
export type FailureClass = 'fencing' | 'transient' | 'permanent';

/** Node's system error codes of a connection that failed or dropped, or of a lookup that may work later. */
const TRANSIENT_NET = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'ESOCKETTIMEDOUT', 'EHOSTUNREACH', 'EHOSTDOWN',
  'ENETUNREACH', 'ENETDOWN', 'ENETRESET', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT',
]);

/** PostgreSQL SQLSTATEs worth waiting out (class 08 is matched by prefix). */
const TRANSIENT_SQL = new Set(['40001', '40P01', '57P01', '57P02', '57P03', '53300', '53400', '55P03', '57014', '58000', '58030']);

/** PostgreSQL SQLSTATE classes no wait can fix: data, integrity, auth, missing database/schema, syntax and names. */
const PERMANENT_SQL_CLASSES = new Set(['0A', '22', '23', '28', '2B', '3D', '3F', '42', '44']);

/** pg's own messages for a connection that broke (they carry no code). */
const TRANSIENT_MESSAGE = /connection terminated|connection (?:timeout|timed out)|timeout exceeded when trying to connect|not queryable|socket hang up|connection (?:reset|refused|closed)/i;

/**
 * Classifies a failure; see {@link FailureClass}. Looks through `HandlerError` and `cause` chains, so a
 * fencing error thrown inside user code is still fencing.
 *
 * @example
 * ```ts
 * import { classifyFailure } from 'rxfeed';
 * if (classifyFailure(error) === 'permanent') throw error; // else wait and retry
 * ```
 */
export function classifyFailure(error: unknown): FailureClass {
  if (fencingError(error)) return 'fencing';
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const verdict = classifyOne(e);
    if (verdict) return verdict;
  }
  return 'transient';
}

/** The fencing error in `error` or its causes (a `LeaseLostError` or a subclass), if any. */
export function fencingError(error: unknown): LeaseLostError | undefined {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof LeaseLostError) return e;
  }
  return undefined;
}

/** The code an error carries: a SQLSTATE (`'42P01'`), a Node system code (`'ECONNREFUSED'`), or undefined. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function classifyOne(e: unknown): FailureClass | undefined {
  if (e instanceof LeaseLostError) return 'fencing';
  if (e instanceof TransientError) return 'transient';
  if (e instanceof CredentialsError || e instanceof InvalidOptionsError || e instanceof ResourceGoneError) return 'permanent';
  if (e instanceof HandlerError) return undefined; // its cause decides
  if (typeof AggregateError !== 'undefined' && e instanceof AggregateError) {
    // Node's happy-eyeballs connect gives one error per address tried.
    return e.errors.length > 0 && e.errors.every((x) => classifyFailure(x) === 'transient') ? 'transient' : undefined;
  }
  const code = errorCode(e);
  if (code !== undefined) {
    if (TRANSIENT_NET.has(code) || TRANSIENT_SQL.has(code) || code.startsWith('08')) return 'transient';
    if (code === 'ENOTFOUND') return 'permanent'; // the name does not resolve: a typo waits forever
    if (/^[0-9A-Z]{5}$/.test(code) && PERMANENT_SQL_CLASSES.has(code.slice(0, 2))) return 'permanent';
  }
  const status = (e as { statusCode?: unknown; status?: unknown } | null)?.statusCode ?? (e as { status?: unknown } | null)?.status;
  if (typeof status === 'number' && status >= 400) {
    return status === 408 || status === 429 || status >= 500 ? 'transient' : 'permanent';
  }
  if (e instanceof Error) {
    if (e.name === 'TimeoutError') return 'transient';
    if (TRANSIENT_MESSAGE.test(e.message)) return 'transient';
    // A bug in code, not a store that is down.
    if (e instanceof TypeError || e instanceof RangeError || e instanceof SyntaxError || e instanceof ReferenceError) return 'permanent';
  }
  return undefined;
}

// The rest of the failure vocabulary, one answer per question, all here:
//  - classifyFailure: may waiting fix it (transient), did ownership end (fencing), or neither (permanent)?
//  - errorKind: what an `error` event says it is (item, fencing, corrupt, infrastructure);
//  - fatalCloseReason: does it end the whole processor, and with which close reason?
//  - readFailureKind / isThrottled: what a failed read was, for `readRetry` events and the unreadable bound.
// What a failure of one service means is known where that service is spoken to: a Source translates its
// failures into this vocabulary (CosmosSource: `toSourceError` turns Cosmos DB status and sub-status codes,
// network codes and retry-after headers into TransientError / PartitionGoneError / ResourceGoneError /
// CredentialsError), and each broker publisher classifies its own refusals (`classifyNatsError`,
// `classifyAmqpError`) as transient or permanent.

/**
 * The kind of an error, from its class: a `HandlerError` is an item failure, a `LeaseLostError` (and so a
 * `ViewFencedError`) is fencing, a `CorruptLeaseError` is a corrupt document, anything else is
 * infrastructure.
 *
 * @internal
 */
export function errorKind(error: Error): ErrorKind {
  if (error instanceof HandlerError) return 'item';
  if (error instanceof LeaseLostError) return 'fencing';
  if (error instanceof CorruptLeaseError) return 'corrupt';
  return 'infrastructure';
}

/**
 * The close reason of a failure no retry can fix and that ends the whole processor (its reader, its
 * coordinator): rejected credentials (`Unauthorized`), a container or database gone (`ResourceGone`), options
 * that cannot work (`Error`). `undefined` for every other failure: it is retried, or ends only its partition.
 *
 * @internal
 */
export function fatalCloseReason(error: unknown): CloseReason | undefined {
  if (error instanceof CredentialsError) return 'Unauthorized';
  if (error instanceof ResourceGoneError) return 'ResourceGone';
  if (error instanceof InvalidOptionsError) return 'Error';
  return undefined;
}

/** @internal True for a failure that ends the whole processor (see {@link fatalCloseReason}). */
export function isFatal(error: unknown): error is Error {
  return fatalCloseReason(error) !== undefined;
}

/** @internal The HTTP status a failure carries (`TransientError.statusCode`, or a client error's `statusCode`). */
function statusOf(error: unknown): unknown {
  return (error as { statusCode?: unknown } | null)?.statusCode;
}

/**
 * True for a read the service refused for the account's request budget (HTTP 429): retried after the service's
 * delay, and never counted towards giving the lease up (another host would be throttled the same).
 *
 * @internal
 */
export function isThrottled(error: unknown): boolean {
  return statusOf(error) === 429;
}

/**
 * What a failed read was, for the `readRetry` event, from the vocabulary sources report in: a 429 is
 * `throttled`, a 408 or a timeout `timeout`, a 5xx `unavailable`, a `TransientError` without a status a
 * `network` failure, anything else `other`.
 *
 * @internal
 */
export function readFailureKind(error: Error): ReadFailureKind {
  const status = statusOf(error);
  if (isThrottled(error)) return 'throttled';
  if (status === 408 || /timed? ?out|timeout/i.test(error.message)) return 'timeout';
  if (typeof status === 'number' && status >= 500) return 'unavailable';
  if (status === undefined && error instanceof TransientError) return 'network';
  return 'other';
}

