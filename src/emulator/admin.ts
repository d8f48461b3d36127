import type { CosmosEmulator } from './CosmosEmulator.js';
import { CosmosHttpError } from './errors.js';
import type { FaultRule } from './faults.js';
import type { Reply } from './server.js';

/** The emulator's control methods the admin API calls: ranges, splits, merges, faults, reset, inspection. */
export type AdminControls = Pick<CosmosEmulator, 'partitionKeyRanges' | 'split' | 'merge' | 'injectFault' | 'clearFaults' | 'reset' | 'dump' | 'requests'>;

/**
 * `/_emulator/...`: the admin operations over HTTP, for an emulator running in another process. `segments`
 * are the path's segments after `_emulator`; a bad or failing request answers a {@link CosmosHttpError}
 * (404 for an unknown operation, 400 for a bad body or a failed operation).
 *
 * @example
 * ```ts
 * adminRequest(emulator, 'POST', ['split'], { databaseId: 'db', containerId: 'items', rangeId: '0' });
 * ```
 */
export function adminRequest(emulator: AdminControls, method: string, segments: string[], body: unknown): Reply {
  const b = (body ?? {}) as Record<string, unknown>;
  const str = (k: string): string => {
    if (typeof b[k] !== 'string') throw new CosmosHttpError(400, `admin request needs a string "${k}"`);
    return b[k];
  };
  const route = `${method} ${segments[0] ?? ''}`;
  try {
    switch (route) {
      case 'GET ranges':
        return { status: 200, body: emulator.partitionKeyRanges(segments[1] ?? '', segments[2] ?? '') };
      case 'POST split': {
        const boundary = typeof b['boundary'] === 'string' ? { boundary: b['boundary'] } : {};
        return { status: 200, body: emulator.split(str('databaseId'), str('containerId'), str('rangeId'), boundary) };
      }
      case 'POST merge':
        return { status: 200, body: emulator.merge(str('databaseId'), str('containerId'), str('leftRangeId'), str('rightRangeId')) };
      case 'POST faults':
        return { status: 201, body: { id: emulator.injectFault(b as unknown as FaultRule).id } };
      case 'DELETE faults':
        emulator.clearFaults();
        return { status: 204 };
      case 'POST reset':
        emulator.reset();
        return { status: 204 };
      case 'GET dump':
        return { status: 200, body: emulator.dump() };
      case 'GET requests':
        return { status: 200, body: emulator.requests() };
      default:
        throw new CosmosHttpError(404, `no admin operation ${route}; see the CosmosEmulator docs`);
    }
  } catch (err) {
    if (err instanceof CosmosHttpError) throw err;
    throw new CosmosHttpError(400, err instanceof Error ? err.message : String(err));
  }
}
