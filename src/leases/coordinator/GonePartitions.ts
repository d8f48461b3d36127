// Role: split and merge — when a reader finds its partition gone, replaces the lease by leases for the
// partitions covering its range now (replaceGoneLease.ts, childLeases in splitMerge.ts), retrying with backoff
// while this host owns the lease; the ownership then ends as PartitionGone (or is given up after an expiration).
// A lease marked replaced whose owner is gone (released, expired) is finished by whichever host sees it first.
import type { Position } from '../../core/Partition.js';
import { LeaseLostError } from '../../errors/index.js';
import { delay, type CoordinatorContext } from './context.js';
import type { Endings } from './Endings.js';
import type { Ownership } from './Ownership.js';
import type { Lease } from '../Lease.js';
import { finishReplacement, replaceGoneLease, type ReplaceContext } from './replaceGoneLease.js';

/** Replacing a gone partition's lease is retried with this first delay (ms), doubling up to the acquire interval. */
const SPLIT_RETRY_MS = 500;

/** @internal Replaces the leases of gone partitions; see the role above. */
export class GonePartitions {
  /** Ids of the marked leases this host is finishing now. */
  readonly #finishing = new Set<string>();

  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly endings: Endings,
    /** A balancing round, now: the children are there to take. */
    private readonly balanceNow: () => void,
  ) {}

  /**
   * Replaces the lease of a gone partition by leases for the partitions covering its range now. Retried
   * with backoff while this host still owns the lease; if it cannot be done within an expiration, the
   * lease is given back (a host never owns a lease it does not read) so a later scan retries.
   */
  replace(owned: Ownership, position: Position | null): Promise<void> {
    const { ctx } = this;
    const work = (async () => {
      const key = `split:${owned.lease.id}`;
      const since = ctx.scheduler.now();
      for (let attempt = 1; !owned.ended && !ctx.stopped(); attempt++) {
        try {
          await owned.enqueue(() => this.#replaceOnce(owned, position));
          ctx.failures.succeeded(key);
          return;
        } catch (error) {
          if (error instanceof LeaseLostError || owned.ended) return;
          if (ctx.fatal(error)) return;
          ctx.failures.failed(key, error, owned.leaseToken);
          if (ctx.scheduler.now() - since >= ctx.t.expirationMs) {
            this.endings.giveUp(owned, `could not replace the lease of the gone partition for ${ctx.t.expirationMs} ms`);
            return;
          }
          await delay(ctx, Math.min(ctx.t.acquireMs, SPLIT_RETRY_MS * 2 ** (attempt - 1)));
        }
      }
      // Stopped while retrying: let the lease go so the next run (or host) handles the split.
      if (!owned.ended) this.endings.giveUp(owned, 'stopped before the split was handled');
    })();
    ctx.track(work);
    return work.finally(() => this.balanceNow());
  }

  /**
   * Finishes the replacement of `lease`, marked replaced by an owner that released it or is silent for an
   * expiration (the balancer judges that): creates the children missing, deletes the lease. Not awaited by
   * the round; a failure is counted and the next round (which lists the lease again) retries.
   */
  finish(lease: Lease): void {
    const { ctx } = this;
    if (this.#finishing.has(lease.id) || ctx.stopped()) return;
    this.#finishing.add(lease.id);
    const key = `finish:${lease.id}`;
    const work = finishReplacement(this.#context(), lease).then(
      (children) => {
        ctx.failures.succeeded(key);
        if (!children) return;
        ctx.log('partition %s gone: finished its replacement by %s', lease.leaseToken, children.join(', '));
        ctx.emit({ type: 'partitionSplit', owner: ctx.owner, lease: lease.leaseToken, children });
        this.balanceNow();
      },
      (error: unknown) => {
        if (!ctx.fatal(error)) ctx.failures.failed(key, error, lease.leaseToken);
      },
    );
    ctx.track(work.finally(() => this.#finishing.delete(lease.id)));
  }

  #context(): ReplaceContext {
    const { ctx } = this;
    return { store: ctx.store, naming: ctx.naming, listPartitions: () => ctx.partitions.refresh() };
  }

  async #replaceOnce(owned: Ownership, position: Position | null): Promise<void> {
    const { ctx } = this;
    if (owned.ended) return;
    const replacement = await replaceGoneLease(this.#context(), owned, position);
    if (replacement.kind === 'fenced') {
      this.endings.lose(owned, 'lost before handling the split', replacement.owner);
      throw new LeaseLostError(owned.leaseToken, ctx.owner, replacement.owner);
    }
    owned.log('partition gone: replaced by %s from %s', replacement.children.join(', '), replacement.from);
    ctx.emit({ type: 'partitionSplit', owner: ctx.owner, lease: owned.leaseToken, children: replacement.children });
    this.endings.retire(owned);
  }
}
