import { randomBytes } from 'node:crypto';
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import type { Change } from '../../core/Change.js';
import { InvalidOptionsError } from '../../errors/index.js';
import type { ViewRow, ViewStore } from '../../sinks/ViewStore.js';
import type { SseHubOptions } from './types.js';

/** @internal What a hub makes of a value for one client: an event's or a snapshot entry's `data`. */
export type Projection<X> = ((value: X) => unknown) | undefined;

/** @internal {@link SseHubOptions}, checked, with their defaults. */
export interface HubSettings<T, R> {
  readonly replayLimit: number;
  readonly heartbeatMs: number;
  readonly maxBufferedBytes: number;
  readonly closeGraceMs: number;
  readonly retryMs: number;
  readonly chunkRows: number;
  readonly project: Projection<Change<T>>;
  readonly projectRow: (row: ViewRow<R>) => unknown;
  readonly scheduler: SchedulerLike;
  readonly view: ViewStore<R> | undefined;
  readonly streamId: string;
}

/** @internal Checks a hub's options and applies their defaults; throws `InvalidOptionsError` naming the option. */
export function resolveHubOptions<T, R>(options: SseHubOptions<T, R>): HubSettings<T, R> {
  const replayLimit = integerOption('replayLimit', options.replayLimit, 1000, 0);
  const heartbeatMs = integerOption('heartbeatMs', options.heartbeatMs, 15_000, 1);
  const maxBufferedBytes = integerOption('maxBufferedBytes', options.maxBufferedBytes, 256 * 1024, 1);
  const closeGraceMs = integerOption('closeGraceMs', options.closeGraceMs, 5000, 0);
  const retryMs = integerOption('retryMs', options.retryMs, 1000, 0);
  const chunkRows = integerOption('snapshotChunkRows', options.snapshotChunkRows, 500, 1);
  functionOption('project', options.project, 'from a change to what its event carries');
  functionOption('projectRow', options.projectRow, 'from a view row to what its snapshot entry carries');
  if (options.view !== undefined && (typeof options.view.rows !== 'function' || typeof options.view.positions !== 'function')) {
    throw new InvalidOptionsError('view', 'must be a ViewStore (with rows() and positions())');
  }
  const streamId = options.streamId ?? randomBytes(6).toString('base64url');
  if (!/^[A-Za-z0-9_-]+$/.test(streamId)) {
    throw new InvalidOptionsError('streamId', `must be letters, digits, '-' or '_', got ${JSON.stringify(streamId)}`);
  }
  return {
    replayLimit,
    heartbeatMs,
    maxBufferedBytes,
    closeGraceMs,
    retryMs,
    chunkRows,
    project: options.project,
    projectRow: options.projectRow ?? ((row) => row.row),
    scheduler: options.scheduler ?? asyncScheduler,
    view: options.view,
    streamId,
  };
}

function integerOption(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidOptionsError(name, `must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}

function functionOption(name: string, value: unknown, what: string): void {
  if (value !== undefined && typeof value !== 'function') throw new InvalidOptionsError(name, `must be a function ${what}`);
}
