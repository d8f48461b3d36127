import { Observable } from 'rxjs';
import type { OperatorFunction } from 'rxjs';
import { asBatches } from '../../core/ChangeBatch.js';
import type { BatchOrBatches, ChangeBatch } from '../../core/ChangeBatch.js';

/*
 * Why not perPartition (src/operators/internal): it runs work per batch, while a sink writes a whole value
 * (a batch, or an array of batches from bufferTime) in ONE transaction, so the unit here is the value.
 *
 * A value may start when fewer than `concurrency` writes are in flight and no earlier pending value shares a
 * partition with it. It is emitted as soon as its write commits: everything earlier in its partitions has
 * been emitted by then (it could not start before), so each partition's order holds at the checkpoint while
 * unrelated partitions overtake each other.
 */

interface Entry<B> {
  readonly value: B;
  readonly batches: readonly ChangeBatch<unknown>[];
  running: boolean;
}

/**
 * Runs `write` for each value (one call per batch or per array), serial per partition, at most
 * `concurrency` at once, and emits what each write resolves to (the value, part of it, or nothing when
 * `undefined`) once it resolved. A rejected write errors the stream.
 *
 * @internal
 */
export function writeInPartitionOrder<B extends BatchOrBatches<unknown>>(
  write: (value: B, batches: readonly ChangeBatch<unknown>[]) => Promise<B | undefined>,
  concurrency: number,
): OperatorFunction<B, B> {
  return (source) =>
    new Observable<B>((subscriber) => {
      const pending: Entry<B>[] = [];
      let inFlight = 0;
      let sourceDone = false;

      const finishIfDone = () => {
        if (sourceDone && pending.length === 0) subscriber.complete();
      };

      const pump = () => {
        if (subscriber.closed) return;
        const blocked = new Set<string>();
        for (const entry of pending) {
          if (inFlight >= concurrency) return;
          const free = entry.batches.every((b) => !blocked.has(b.partition));
          for (const b of entry.batches) blocked.add(b.partition);
          if (entry.running || !free) continue;
          entry.running = true;
          inFlight++;
          write(entry.value, entry.batches).then(
            (written) => {
              if (subscriber.closed) return;
              inFlight--;
              pending.splice(pending.indexOf(entry), 1);
              if (written !== undefined) subscriber.next(written);
              pump();
              finishIfDone();
            },
            (error: unknown) => subscriber.error(error),
          );
        }
      };

      const upstream = source.subscribe({
        next: (value) => {
          const batches = asBatches(value);
          if (batches.length === 0) {
            subscriber.next(value); // nothing to write, nothing to order
            return;
          }
          pending.push({ value, batches, running: false });
          pump();
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          sourceDone = true;
          finishIfDone();
        },
      });
      // Writes in flight finish on their own (a transaction commits or rolls back); nothing is emitted after.
      return () => upstream.unsubscribe();
    });
}
