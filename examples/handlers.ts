/**
 * @summary Handlers: the change feed processor shape (initialize, process, close, error) with a poison order dead-lettered and re-driven.
 *
 * Run: `npx tsx examples/handlers.ts`
 *
 * Two hosts share one lease store and split four partitions between them; each calls `processChanges` one
 * batch at a time per partition. One order always fails: it is retried three times, written to a dead-letter
 * store with its error, and its partition moves on. Ends by fixing the cause, re-driving the dead letter,
 * and checking that every order was shipped and every checkpoint reached the end. Delivery is at least once
 * (a re-run after a failure or a hand-over sees some changes again), so `ship` is idempotent.
 */
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { MemoryDeadLetterStore, MemoryLeaseStore, MemorySource, processChanges, redriveDeadLetters } from 'rxfeed';
import type { ChangeHandlers, DeadLetter } from 'rxfeed';

interface Order {
  id: string;
  customer: string;
  totalCents: number;
}

/** Runs the example; resolves with what it found (and `ok` when its final check passed). */
export async function main(orders = 200): Promise<{ ok: boolean; shipped: number; deadLettered: number; redriven: number }> {
  const source = new MemorySource<Order>({ partitions: 4 });
  const leases = new MemoryLeaseStore();
  const deadLetter = new MemoryDeadLetterStore<Order>();
  const shipped = new Set<string>();
  let replays = 0;
  let fixed = false;

  const ship = (order: Order) => {
    if (order.totalCents < 0 && !fixed) throw new Error(`order ${order.id} has a negative total`);
    if (shipped.has(order.id)) replays++; // idempotent: seen again after a retry or a hand-over
    shipped.add(order.id);
  };

  const handlers = (host: string): ChangeHandlers<Order> => ({
    processInitialize: (ctx) => console.log(`${host}: partition ${ctx.leaseToken} opened (epoch ${ctx.epoch})`),
    processChanges: async (changes, ctx) => {
      for (const change of changes) {
        if (ctx.signal.aborted) return; // ownership ended: the next owner takes it from the last checkpoint
        ship(change.document!);
      }
    },
    processClose: (ctx, reason) => console.log(`${host}: partition ${ctx.leaseToken} closed (${reason})`),
    processError: (error, ctx) => console.log(`${host}: ${ctx ? `partition ${ctx.leaseToken}: ` : ''}${error.message}`),
  });

  const options = {
    source,
    leases,
    leasePrefix: 'shipping.',
    pollIntervalMs: 50,
    leaseAcquireIntervalMs: 100,
    leaseRenewIntervalMs: 500,
    leaseExpirationMs: 2_000,
    checkpoint: { count: 50, ms: 200 },
    onFailure: { retry: { attempts: 3, initialBackoffMs: 20 }, deadLetter },
  } as const;
  const hosts = [
    processChanges<Order>({ ...options, instanceName: 'host-1' }, handlers('host-1')),
    processChanges<Order>({ ...options, instanceName: 'host-2' }, handlers('host-2')),
  ];

  for (let i = 0; i < orders; i++) {
    source.write({ id: `order-${i}`, customer: `customer-${i % 7}`, totalCents: i === 42 ? -100 : 1_000 + i });
    if (i % 20 === 0) await sleep(10);
  }
  // Wait until every order is shipped or dead-lettered.
  for (let waited = 0; shipped.size + deadLetter.size < orders && waited < 20_000; waited += 50) await sleep(50);
  await Promise.all(hosts.map((h) => h.close()));

  const letters: DeadLetter<Order>[] = await deadLetter.list();
  for (const l of letters) console.log(`dead letter: ${l.documentId} after ${l.attempts} attempts: ${l.error.message}`);
  fixed = true; // the cause is fixed: re-drive
  const { redriven } = await redriveDeadLetters({ store: deadLetter, handler: (letter) => ship(letter.document!) });

  const checkpoints = (await leases.list('shipping.')).leases.filter((l) => !l.id.endsWith('.info') && !l.id.endsWith('.lock'));
  const atEnd = checkpoints.every((l) => l.continuation === `mem:${source.latestLsn(l.leaseToken)}`);
  const ok = shipped.size === orders && letters.length === 1 && letters[0]!.documentId === 'order-42' && redriven.length === 1 && atEnd;
  console.log(
    `check: ${ok ? 'OK' : 'FAILED'} (${shipped.size}/${orders} shipped, ${replays} seen again, ${letters.length} dead-lettered and re-driven, checkpoints at the end: ${atEnd})`,
  );
  return { ok, shipped: shipped.size, deadLettered: letters.length, redriven: redriven.length };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    (result) => process.exit(result.ok ? 0 : 1),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
