/*
 * Why: a view write of a lease this host lost (stolen, expired, handed over) used to hold its sink's write slot
 * until the store answered; batches of leases the host still owns, or takes next, queued behind it (the
 * simulation saw a lease taken 55 ms later wait behind two such writes of 6.8 s). Nobody waits for such a write:
 * its batches are dropped, never checkpointed, and the new owner reads them again. So the sink stops waiting
 * for it as soon as the last of its leases ends, and it finishes in the background, without a slot. The epoch
 * fence is untouched: the write left before the ownership ended, as it always could, and the store refuses it
 * once the new owner wrote (or it lands first, harmlessly: guarded rows keep the highest LSN per key, and an
 * exactly-once mark or position it moves is one the new owner's replays skip or keep). The ownership's signal
 * also aborts when user code halts the partition (or the pipeline fails for good) in another operator: a write
 * in flight then is detached too, and its batches, dropped, are read again from the checkpoint with the rest.
 */

/**
 * A signal aborted once every one of `signals` aborted (never for an empty list), and `dispose` to stop
 * listening to them (they may live far longer: a lease's ownership outlives its writes). @internal
 */
export function allAborted(signals: readonly AbortSignal[]): { readonly signal: AbortSignal; dispose(): void } {
  const all = new AbortController();
  const listening: (readonly [AbortSignal, () => void])[] = [];
  const dispose = (): void => {
    for (const [signal, listener] of listening) signal.removeEventListener('abort', listener);
    listening.length = 0;
  };
  if (signals.length === 0) return { signal: all.signal, dispose };
  let live = 0;
  for (const signal of new Set(signals)) {
    if (signal.aborted) continue;
    live++;
    const listener = (): void => {
      if (--live === 0) all.abort(signal.reason);
    };
    signal.addEventListener('abort', listener, { once: true });
    listening.push([signal, listener]);
  }
  if (live === 0) all.abort(signals[0]!.reason);
  return { signal: all.signal, dispose };
}

/** How a detached write ended, for the log: the store's answer, or its error. */
export type DetachedOutcome = { readonly ok: true } | { readonly ok: false; readonly error: unknown };

/**
 * The writes of one sink subscription that no longer hold a write slot: writes whose leases all ended while
 * they were in flight. At most `limit` are detached at once (the sink passes its `concurrency`): past that, a
 * deposed write keeps its slot until one of them settles or it does, as every write did before. Leases that
 * flap (lost and taken again and again, each time with a slow write in flight) so never put more than `limit`
 * writes of this sink on the store beyond its `concurrency`: at most twice as many in flight, a pool sized for
 * `concurrency` connections queues them, and live partitions get their slots back at once.
 *
 * @example
 * ```ts
 * const detached = new DetachedWrites(4);
 * const deposed = allAborted(batches.map((b) => b.origin!.tracker.signal));
 * const outcome = await detached.wait(view.write(write, { signal: deposed.signal }), deposed.signal).finally(deposed.dispose);
 * if (outcome === undefined) dropAll(batches); // the write goes on without a slot
 * ```
 *
 * @internal
 */
export class DetachedWrites {
  /** Most detached writes at once: a positive integer or `Infinity`. */
  readonly limit: number;
  #count = 0;
  /** Deposed writes waiting for a place among the detached (the limit was reached), first come first served. */
  readonly #queued = new Set<() => void>();

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Detached writes not settled yet. */
  get count(): number {
    return this.#count;
  }

  /**
   * Waits for `writing` until `deposed` aborts: resolves `{ value }` when it settles first (rejects with its
   * error), or `undefined` once `deposed` aborted and fewer than `limit` writes are detached; the write is then
   * counted as detached until it settles, when `settled` hears how (it is never waited for again).
   */
  wait<T>(writing: Promise<T>, deposed: AbortSignal, settled?: (outcome: DetachedOutcome) => void): Promise<{ readonly value: T } | undefined> {
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (): void => {
        done = true;
        deposed.removeEventListener('abort', detach);
        this.#queued.delete(detach);
      };
      const detach = (): void => {
        if (done) return;
        if (this.#count >= this.limit) {
          this.#queued.add(detach);
          return;
        }
        finish();
        this.#count++;
        const over = (outcome: DetachedOutcome): void => {
          this.#count--;
          settled?.(outcome);
          this.#wake();
        };
        writing.then(
          () => over({ ok: true }),
          (error: unknown) => over({ ok: false, error }),
        );
        resolve(undefined);
      };
      writing.then(
        (value) => {
          if (done) return;
          finish();
          resolve({ value });
        },
        (error: unknown) => {
          if (done) return;
          finish();
          reject(error);
        },
      );
      if (deposed.aborted) detach();
      else deposed.addEventListener('abort', detach, { once: true });
    });
  }

  /** A detached write settled: the first deposed write waiting for its place takes it. */
  #wake(): void {
    const next = this.#queued.values().next();
    if (!next.done) next.value();
  }
}
