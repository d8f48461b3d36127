import type { Container } from '@azure/cosmos';

/** What {@link takeRoutingMapFailure} found in the client's cache of a container's partition key ranges. */
export type RoutingMapState =
  /** The cache held a failed read of the ranges; it is removed now, so the next read fetches them again. */
  | { readonly kind: 'failed'; readonly reason: unknown }
  /** No failed read is cached (none cached, one in flight, or a good one). */
  | { readonly kind: 'healthy' }
  /** The cache is not where `@azure/cosmos` 4.x keeps it (another SDK version): nothing could be checked. */
  | { readonly kind: 'unreachable' };

type RoutingMaps = Record<string, PromiseLike<unknown> | undefined>;

/**
 * The client-wide map `collection link → promise of its routing map`. In `@azure/cosmos` 4.x every
 * `Items` object holds the client's `PartitionKeyRangeCache` (shared through the client context, so a new
 * `client.database(d).container(c)` gets the same one), whose `collectionRoutingMapByCollectionId` stores the
 * promise of the `/pkranges` read before it settles.
 */
function routingMaps(container: Container): RoutingMaps | undefined {
  const items = container.items as unknown as { partitionKeyRangeCache?: { collectionRoutingMapByCollectionId?: unknown } };
  const maps = items.partitionKeyRangeCache?.collectionRoutingMapByCollectionId;
  return maps !== null && typeof maps === 'object' ? (maps as RoutingMaps) : undefined;
}

const PENDING = Symbol('pending');

/**
 * Finds and removes a *failed* read of `container`'s partition key ranges from the SDK client's cache.
 *
 * `@azure/cosmos` 4.9 (`PartitionKeyRangeCache.onCollectionRoutingMap`) caches the promise of a container's
 * routing map and keeps it when it rejects: after one `/pkranges` read that failed past the SDK's own retries
 * (a 503 while a host starts, say), every change feed read of that container through that client fails at
 * once with the old message and no status code, for as long as the client lives. No public API refreshes the
 * entry and a new `Container` reference shares it; removing the rejected promise makes the next read fetch
 * the ranges again. A pending or resolved entry is left alone, and this never waits for a read in flight.
 *
 * @example
 * ```ts
 * const state = await takeRoutingMapFailure(container);
 * if (state.kind === 'failed') console.log('cleared a cached failure:', state.reason);
 * ```
 * @internal
 */
export async function takeRoutingMapFailure(container: Container): Promise<RoutingMapState> {
  const maps = routingMaps(container);
  if (!maps) return { kind: 'unreachable' };
  // The SDK keys the cache by the container link without its slashes (`getIdFromLink`).
  const key = container.url.replace(/^\/+|\/+$/g, '');
  const cached = maps[key];
  if (!cached || typeof cached.then !== 'function') return { kind: 'healthy' };
  // A settled promise runs its handlers in a microtask, before the macrotask below: no wait on a pending read.
  const outcome = await Promise.race([
    Promise.resolve(cached).then(
      () => ({ ok: true as const }),
      (reason: unknown) => ({ ok: false as const, reason }),
    ),
    new Promise<typeof PENDING>((resolve) => setImmediate(resolve, PENDING)),
  ]);
  if (outcome === PENDING || outcome.ok) return { kind: 'healthy' };
  if (maps[key] === cached) delete maps[key];
  return { kind: 'failed', reason: outcome.reason };
}
