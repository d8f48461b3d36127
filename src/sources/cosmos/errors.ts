import { CredentialsError, ResourceGoneError, RxfeedError, TransientError } from '../../errors/index.js';
import { PartitionGoneError } from '../../errors/PartitionGoneError.js';
import { isAbortError } from '../../internal/abortWatch.js';

/** Node socket errors worth retrying. */
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EAI_FAIL',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'TimeoutError',
]);

/** Statuses the service uses for "try again": timeout, throttled, retry-with, server error, unavailable. */
const TRANSIENT_STATUSES = new Set([408, 429, 449, 500, 502, 503, 504]);

/** 404 substatus 1002: ReadSessionNotAvailable (a replica lags the session); retrying helps. */
const READ_SESSION_NOT_AVAILABLE = 1002;

interface SdkError {
  code?: number | string;
  substatus?: number;
  retryAfterInMs?: number;
  retryAfterInMilliseconds?: number;
  headers?: Record<string, unknown>;
  name?: string;
  message?: string;
  cause?: unknown;
}

function header(err: SdkError, name: string): string | undefined {
  const value = err.headers?.[name];
  return value === undefined || value === null ? undefined : String(value);
}

function intHeader(err: SdkError, name: string): number | undefined {
  const text = header(err, name);
  if (text === undefined) return undefined;
  const n = Number.parseInt(text, 10);
  return Number.isFinite(n) ? n : undefined;
}

/** The socket-level code of an error or of its causes (the HTTP pipeline wraps them). @internal */
export function networkCode(err: unknown): string | undefined {
  for (let e = err as SdkError | undefined, depth = 0; e && depth < 4; e = e.cause as SdkError | undefined, depth++) {
    if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) return e.code;
    if (e.name === 'TimeoutError') return 'TimeoutError';
    if (typeof e.message === 'string' && /socket hang up|ECONNRESET|other side closed/i.test(e.message)) return 'ECONNRESET';
  }
  return undefined;
}

/**
 * Translates an `@azure/cosmos` failure into the error a {@link Source} reports:
 * 429/503/408/5xx/timeouts/socket resets → {@link TransientError} (with the service's retry-after);
 * 404 (not a session 404) and a continuation for another incarnation of the container → {@link ResourceGoneError};
 * 401/403 → {@link CredentialsError}; 410 (the partition-key iterator's split) → {@link PartitionGoneError}.
 * Anything else is returned unchanged. Messages never include keys: the SDK's messages do not carry them;
 * a network failure names the account's `hostPort` when given.
 *
 * @internal
 */
export function toSourceError(err: unknown, resource: string, partitionId: string, hostPort?: string): unknown {
  if (err instanceof RxfeedError || isAbortError(err)) return err;
  const e = (err ?? {}) as SdkError;
  const status = typeof e.code === 'number' ? e.code : undefined;
  const substatus = e.substatus ?? intHeader(e, 'x-ms-substatus');
  if (status !== undefined) {
    if (status === 401 || status === 403) return new CredentialsError(status, { cause: err });
    if (status === 404 && substatus !== READ_SESSION_NOT_AVAILABLE) return new ResourceGoneError(resource, { cause: err });
    if (status === 410) return new PartitionGoneError(partitionId, { cause: err });
    if (TRANSIENT_STATUSES.has(status) || status === 404) {
      const retryAfterMs = e.retryAfterInMs ?? e.retryAfterInMilliseconds ?? intHeader(e, 'x-ms-retry-after-ms');
      return new TransientError(`${resource}: HTTP ${status}${substatus ? `/${substatus}` : ''} reading partition ${partitionId}`, {
        statusCode: status,
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
        cause: err,
      });
    }
    return err;
  }
  const code = networkCode(err);
  if (code !== undefined) {
    return new TransientError(`${resource}: ${code}${hostPort ? ` at ${hostPort}` : ''} reading partition ${partitionId}`, {
      ...(code === 'TimeoutError' ? { statusCode: 408 } : {}),
      cause: err,
    });
  }
  if (typeof e.message === 'string' && /not for the current container definition/i.test(e.message)) {
    // The position was written for an earlier incarnation of the container (deleted and created again).
    return new ResourceGoneError(`${resource} (the container was re-created; stored positions belong to the old one)`, { cause: err });
  }
  return err;
}

/**
 * The error to report for a read whose routing map (the container's partition key ranges) could not be
 * fetched, given the failure the SDK had cached (`takeRoutingMapFailure` has removed it by then).
 * Rejected credentials and a missing container keep their meaning ({@link CredentialsError},
 * {@link ResourceGoneError}); anything else becomes a {@link TransientError}, since the next read fetches
 * the ranges again.
 *
 * @internal
 */
export function routingMapError(reason: unknown, resource: string, partitionId: string, hostPort?: string): RxfeedError {
  const mapped = toSourceError(reason, resource, partitionId, hostPort);
  if (mapped instanceof CredentialsError || mapped instanceof ResourceGoneError) return mapped;
  const transient = mapped instanceof TransientError ? mapped : undefined;
  const message = reason instanceof Error ? reason.message : String(reason);
  return new TransientError(
    `${resource}: reading its partition key ranges failed (${message}) before reading partition ${partitionId}; ` +
      "dropped the failure the SDK client had cached, the next read fetches them again",
    {
      ...(transient?.statusCode !== undefined ? { statusCode: transient.statusCode } : {}),
      ...(transient?.retryAfterMs !== undefined ? { retryAfterMs: transient.retryAfterMs } : {}),
      cause: reason,
    },
  );
}
