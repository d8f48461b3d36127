// Role: lease time on this host's clock — when it first saw each lease version and each handoff request, so
// no decision depends on another host's clock (docs/lease-protocol.md, "Clocks").
import { HANDOFF_AT, HANDOFF_TO } from '../protocol/signals.js';
import type { Lease } from '../Lease.js';

/**
 * Lease time as this host saw it, so that no decision depends on another host's clock (the approach of
 * Kubernetes leader election). A lease's `timestampMs` and a handoff request's time are written with the
 * writer's clock; comparing them with this host's clock turns clock skew into two live owners. Instead this
 * host notes, on its own monotonic scheduler clock, when it first saw each lease version (its etag) and each handoff
 * request, and judges expiry and staleness from those moments: a version first seen at `t` cannot have been
 * written later than `t`, so its owner (which counts its own deadline from before its write) stops using the
 * lease before `t + expiration`, whatever the clocks say. The one assumption left: clocks run at about the same
 * rate (drift well under the deadline margin, a tenth of the expiration). A wall clock would not do: a step
 * (NTP) forward would end the wait for an expiry early, so the scheduler's clock is a monotonic one.
 *
 * A request this host wrote itself counts from the first version carrying it that its owner wrote since: the
 * owner saw the request before that write, so it gives the lease up (handoff deadline) before this host may
 * take it by force. While the lease still is the version this host wrote, its owner is silent, and the lease
 * expires as any other.
 *
 * @internal
 */
export class Observations {
  readonly #versions = new Map<string, { readonly etag: string; readonly since: number }>();
  readonly #requests = new Map<string, { readonly key: string; readonly since: number }>();
  /** Per lease id, the etag of this host's own request write. */
  readonly #asked = new Map<string, string>();

  constructor(private readonly owner: string) {}

  /** This host's request landed as `stored`. */
  asked(stored: Lease): void {
    this.#asked.set(stored.id, stored.etag);
  }

  /** Notes `lease` as seen at `now` (scheduler time) and returns it in local time: see {@link Observations}. */
  observe(lease: Lease, now: number): Lease {
    let version = this.#versions.get(lease.id);
    if (version?.etag !== lease.etag) {
      version = { etag: lease.etag, since: now };
      this.#versions.set(lease.id, version);
    }
    const requestSince = this.#requestSince(lease, now);
    const properties = requestSince === undefined ? lease.properties : { ...lease.properties, [HANDOFF_AT]: String(requestSince) };
    return { ...lease, timestampMs: version.since, properties };
  }

  /** When this host first saw the handoff request in `lease` (scheduler time), or `undefined` if it has none. */
  requestSince(lease: Lease): number | undefined {
    const key = requestKey(lease);
    const seen = this.#requests.get(lease.id);
    return key !== undefined && seen?.key === key ? seen.since : undefined;
  }

  /** Forgets leases not in `ids` (deleted, or another processor's). */
  keepOnly(ids: ReadonlySet<string>): void {
    for (const map of [this.#versions, this.#requests, this.#asked]) for (const id of map.keys()) if (!ids.has(id)) map.delete(id);
  }

  #requestSince(lease: Lease, now: number): number | undefined {
    const key = requestKey(lease);
    if (key === undefined) {
      this.#requests.delete(lease.id);
      return undefined;
    }
    // Still the version this host wrote: no answer yet, its clock has not started.
    if (lease.properties[HANDOFF_TO] === this.owner && this.#asked.get(lease.id) === lease.etag) return now;
    const seen = this.#requests.get(lease.id);
    if (seen?.key === key) return seen.since;
    this.#requests.set(lease.id, { key, since: now });
    return now;
  }
}

function requestKey(lease: Lease): string | undefined {
  const to = lease.properties[HANDOFF_TO];
  const at = lease.properties[HANDOFF_AT];
  return to && at !== undefined ? `${to}\u0000${at}` : undefined;
}
