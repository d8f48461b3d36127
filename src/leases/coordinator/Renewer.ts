// Role: keeps owned leases alive — the first renewal at a spread phase, each next one a renew interval after
// the last confirmed write, on the renewal grid; a failed renewal is retried until the local deadline.
import { LeaseLostError } from '../../errors/index.js';
import type { Lease } from '../Lease.js';
import type { CoordinatorContext } from './context.js';
import type { Ownership } from './Ownership.js';
import { onRenewalGrid, RenewalPhases } from './schedule.js';

/** @internal How the renewer writes (the LeaseWriter). */
export interface RenewalWrites {
  write(owned: Ownership, change: (current: Lease) => Lease): Promise<Lease>;
  withLoad(owned: Ownership, lease: Lease): Lease;
}

/** @internal Renews owned leases; see the role above. */
export class Renewer {
  readonly #phases: RenewalPhases;

  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly writes: RenewalWrites,
  ) {
    this.#phases = new RenewalPhases(ctx.t.renewMs);
  }

  /** A lease was just acquired: its first renewal, at the next spread phase. */
  start(owned: Ownership): void {
    this.schedule(owned, this.#phases.next());
  }

  /** The next renewal of `owned` in `delayMs` (on the grid), replacing any scheduled one. */
  schedule(owned: Ownership, delayMs: number): void {
    owned.renewTimer?.unsubscribe();
    // Renewals go on while a drain runs (it may outlast the expiration), until the lease is let go.
    if (owned.ended) return;
    const { scheduler } = this.ctx;
    owned.renewTimer = scheduler.schedule(() => void this.#renew(owned), onRenewalGrid(scheduler.now(), delayMs, this.ctx.t.renewGridMs));
  }

  async #renew(owned: Ownership): Promise<void> {
    if (owned.ended) return;
    const { ctx } = this;
    const key = `renew:${owned.lease.id}`;
    const { writes } = this;
    try {
      await writes.write(owned, (l) => writes.withLoad(owned, { ...l, timestampMs: ctx.now() }));
      ctx.failures.succeeded(key);
      owned.log('renewed');
    } catch (error) {
      if (error instanceof LeaseLostError || owned.ended) return;
      if (ctx.fatal(error)) return;
      ctx.failures.failed(key, error, owned.leaseToken);
      // The local deadline ends the ownership if no retry lands in time.
      this.schedule(owned, ctx.t.renewRetryMs);
    }
  }
}
