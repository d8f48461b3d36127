import type { ContainerState, Doc } from './types.js';

/** A document's time to live in seconds under its container's policy, or `undefined` when it never expires. */
export function effectiveTtl(c: ContainerState, doc: Doc): number | undefined {
  const containerTtl = c.resource['defaultTtl'];
  if (typeof containerTtl !== 'number') return undefined; // TTL off: per-item ttl is ignored, as in the service.
  const itemTtl = doc['ttl'];
  const ttl = typeof itemTtl === 'number' ? itemTtl : containerTtl;
  return ttl === -1 ? undefined : ttl;
}

/** Recomputes every document's expiry after the container's `defaultTtl` changed (TTL counts from `_ts`). */
export function redateExpiries(c: ContainerState): void {
  c.nextExpiryMs = Infinity;
  for (const d of c.docs.values()) {
    const ttl = effectiveTtl(c, d.body);
    d.expiresAtMs = ttl === undefined ? undefined : (d.body['_ts'] as number) * 1000 + ttl * 1000;
    if (d.expiresAtMs !== undefined) c.nextExpiryMs = Math.min(c.nextExpiryMs, d.expiresAtMs);
  }
}
