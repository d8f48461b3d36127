/**
 * Where a client stands in a hub's event stream: the stream it was served by (a new id for each hub, so a
 * restarted server knows an id is from a previous process) and, per partition (lease token), the LSN of the
 * newest change it has. LSNs continue along split and merge lineage, so these positions keep their meaning
 * across a server restart and across splits: a restarted hub can tell what a client missed, or snapshot it again.
 * @internal Wire format of `rxfeed/sse`, not exported from it.
 */
export interface SseEventPosition {
  readonly stream: string;
  /** LSN reached per lease token. */
  readonly positions: ReadonlyMap<string, number>;
}

/**
 * The `id:` of an event: `<stream>.<token>:<lsn>,<token>:<lsn>…` with LSNs in base 36 and tokens URI-encoded.
 *
 * @example
 * ```ts
 * import { formatEventId } from './eventId.js';
 * formatEventId('k3f9q2', new Map([['0', 42], ['1', 7]])); // 'k3f9q2.0:16,1:7'
 * ```
 * @internal Wire format of `rxfeed/sse`, not exported from it.
 */
export function formatEventId(stream: string, positions: ReadonlyMap<string, number>): string {
  let out = `${stream}.`;
  let first = true;
  for (const [token, lsn] of positions) {
    out += `${first ? '' : ','}${encodeURIComponent(token)}:${lsn.toString(36)}`;
    first = false;
  }
  return out;
}

/**
 * Reads an id made by {@link formatEventId} (as a browser sends it back in `Last-Event-ID`); `undefined` when it
 * is not one (empty, malformed, or an LSN that is not a non-negative safe integer).
 *
 * @example
 * ```ts
 * import { parseEventId } from './eventId.js';
 * parseEventId('k3f9q2.0:16,1:7'); // { stream: 'k3f9q2', positions: Map { '0' => 42, '1' => 7 } }
 * ```
 * @internal Wire format of `rxfeed/sse`, not exported from it.
 */
export function parseEventId(id: string | undefined): SseEventPosition | undefined {
  if (!id) return undefined;
  const dot = id.indexOf('.');
  if (dot <= 0) return undefined;
  const positions = new Map<string, number>();
  const rest = id.slice(dot + 1);
  if (rest !== '') {
    for (const part of rest.split(',')) {
      const colon = part.indexOf(':');
      if (colon <= 0 || !/^[0-9a-z]{1,11}$/.test(part.slice(colon + 1))) return undefined;
      const lsn = parseInt(part.slice(colon + 1), 36);
      let token: string;
      try {
        token = decodeURIComponent(part.slice(0, colon));
      } catch {
        return undefined;
      }
      if (!Number.isSafeInteger(lsn) || positions.has(token)) return undefined;
      positions.set(token, lsn);
    }
  }
  return { stream: id.slice(0, dot), positions };
}
