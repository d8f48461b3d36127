/**
 * A position in a hub's event stream: the hub's stream id (new for every hub, so ids of a previous server
 * process are recognised as foreign) and the sequence number of a change in it (1, 2, 3, … ; 0 = before the first).
 */
export interface SseEventPosition {
  readonly stream: string;
  readonly seq: number;
}

/**
 * The `id:` of the event at `seq` in `stream`: `<stream>.<seq>`.
 *
 * @example
 * ```ts
 * import { formatEventId } from 'rxfeed/sse';
 * formatEventId('k3f9q2', 42); // 'k3f9q2.42'
 * ```
 */
export function formatEventId(stream: string, seq: number): string {
  return `${stream}.${seq}`;
}

/**
 * Reads an id made by {@link formatEventId} (as a browser sends it back in `Last-Event-ID`); `undefined` when it
 * is not one (empty, malformed, or a sequence number that is not a non-negative safe integer).
 *
 * @example
 * ```ts
 * import { parseEventId } from 'rxfeed/sse';
 * parseEventId('k3f9q2.42'); // { stream: 'k3f9q2', seq: 42 }
 * ```
 */
export function parseEventId(id: string | undefined): SseEventPosition | undefined {
  if (!id) return undefined;
  const dot = id.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const digits = id.slice(dot + 1);
  if (!/^\d{1,16}$/.test(digits)) return undefined;
  const seq = Number(digits);
  if (!Number.isSafeInteger(seq)) return undefined;
  return { stream: id.slice(0, dot), seq };
}
