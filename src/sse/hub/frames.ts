import type { Change } from '../../core/Change.js';
import { formatSseMessage } from '../eventFormat.js';
import { formatEventId, parseEventId } from '../eventId.js';
import type { SseEntry } from '../ReplayBuffer.js';
import type { Projection } from './options.js';
import type { SseChangeEvent } from './types.js';

/** @internal The event of one change: its id, operation, partition, LSN and time, and the projection's output. */
export function changeFrame<T>(entry: SseEntry<T>, project: Projection<Change<T>>, id: string | undefined): string {
  const { change } = entry;
  const event: SseChangeEvent = {
    id: change.id,
    operation: change.operation,
    partition: entry.partition,
    lsn: change.lsn,
    timestampMs: change.timestampMs,
    ...(project ? { data: project(change) } : {}),
  };
  return formatSseMessage({ ...(id === undefined ? {} : { id }), data: JSON.stringify(event) });
}

/**
 * @internal The event id a client is sent for the hub's `eventId`: with the client's own marks (`after`, from a
 * snapshot or a resume) where they are further than the hub's positions.
 */
export function clientEventId(streamId: string, eventId: string, after: ReadonlyMap<string, number> | undefined): string {
  if (!after) return eventId;
  const positions = new Map(parseEventId(eventId)?.positions);
  for (const [token, lsn] of after) if (lsn > (positions.get(token) ?? -1)) positions.set(token, lsn);
  return formatEventId(streamId, positions);
}
