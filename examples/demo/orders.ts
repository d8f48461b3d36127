/**
 * @summary What the demo's processes share: names, lease timings, worker messages, orders as written to Cosmos DB, the summary row the view keeps per order, a
 * writer that produces a steady mix of creates, updates and cancellations, and the final view-vs-source check.
 */
import type { Container } from '@azure/cosmos';
import type { Change, ViewRow } from 'rxfeed';

/** One order line. */
export interface OrderLine {
  readonly sku: string;
  readonly qty: number;
  /** Unit price in cents (integers keep totals exact). */
  readonly priceCents: number;
}

/** An order document in the `orders` container (partition key `/customerId`). */
export interface Order {
  readonly id: string;
  readonly customerId: string;
  readonly status: 'new' | 'paid' | 'shipped' | 'cancelled';
  readonly lines: readonly OrderLine[];
  readonly updatedAt: string;
}

/** The flat row the view keeps per open order (snake_case: these are SQL columns too). */
export interface OrderSummary {
  readonly customer: string;
  readonly status: string;
  readonly line_count: number;
  readonly total_cents: number;
}

/** Database and container names the demo uses. */
export const DEMO = {
  database: 'shop',
  orders: 'orders',
  leases: 'leases',
  leasePrefix: 'order-summary.',
  viewTable: 'order_summary',
  viewChannel: 'order_summary',
} as const;

/** What a worker tells the parent (besides the view calls). */
export type WorkerMessage =
  | { kind: 'ready'; host: string }
  | { kind: 'lease'; host: string; type: 'leaseAcquired' | 'leaseReleased' | 'leaseLost' | 'leaseTakenOver'; lease: string; detail: string }
  | { kind: 'problem'; host: string; text: string }
  | { kind: 'stopped'; host: string };

/** Lease timings of the demo: short, so a takeover shows within seconds (production defaults are far longer). */
export const DEMO_LEASE_TIMINGS = { leaseAcquireIntervalMs: 500, leaseRenewIntervalMs: 1_000, leaseExpirationMs: 4_000 } as const;

/** The summary row of an order. */
export function summarize(order: Order): OrderSummary {
  return {
    customer: order.customerId,
    status: order.status,
    line_count: order.lines.length,
    total_cents: order.lines.reduce((sum, l) => sum + l.qty * l.priceCents, 0),
  };
}

/** The view's projection: a change's document to its summary row. */
export const projectOrder = (change: Change<Order>): OrderSummary | undefined => change.document && summarize(change.document);

/** Cancelled orders leave the view (a soft delete: LatestVersion mode has no delete events). */
export const isCancelled = (change: Change<Order>): boolean => change.document?.status === 'cancelled';

/** A small deterministic random source (mulberry32), so a run can be repeated with the same seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Counts of what {@link OrderWriter} did. */
export interface WriterStats {
  creates: number;
  updates: number;
  cancels: number;
  deletes: number;
  failures: number;
}

/**
 * Writes a steady stream of order changes: about 55% new orders, 35% updates of open orders (a line added,
 * paid, shipped) and 10% cancellations (or, with `deletes`, 5% cancellations and 5% deletes). Two operations of one tick never touch the same order, so the
 * writer's own copy of each order stays equal to what is stored.
 */
export class OrderWriter {
  readonly stats: WriterStats = { creates: 0, updates: 0, cancels: 0, deletes: 0, failures: 0 };
  readonly #open = new Map<string, Order>();
  readonly #random: () => number;
  #next = 0;

  readonly #container: Container;
  readonly #customers: number;
  readonly #deletes: boolean;

  /**
   * @param options.deletes - delete half of the orders that leave (the other half is cancelled). Only an
   *   AllVersionsAndDeletes feed sees deletes. Default `false`.
   */
  constructor(container: Container, options: { seed?: number; customers?: number; deletes?: boolean } = {}) {
    this.#container = container;
    this.#deletes = options.deletes ?? false;
    this.#random = seededRandom(options.seed ?? 42);
    this.#customers = options.customers ?? 200;
  }

  /** Writes made so far (creates, updates and cancellations). */
  get written(): number {
    return this.stats.creates + this.stats.updates + this.stats.cancels + this.stats.deletes;
  }

  /** Runs `count` writes at once and resolves when all answered (failures are counted, not thrown). */
  async tick(count: number): Promise<void> {
    const busy = new Set<string>();
    const ops: Promise<void>[] = [];
    for (let i = 0; i < count; i++) ops.push(this.#one(busy));
    await Promise.all(ops);
  }

  async #one(busy: Set<string>): Promise<void> {
    const r = this.#random();
    const target = r < 0.55 || this.#open.size < 20 ? undefined : this.#pickOpen(busy);
    try {
      if (!target) {
        const order = this.#newOrder();
        busy.add(order.id);
        await this.#container.items.create(order);
        this.#open.set(order.id, order);
        this.stats.creates++;
      } else if (r < 0.9) {
        const order = this.#evolve(target);
        await this.#container.items.upsert(order);
        this.#open.set(order.id, order);
        this.stats.updates++;
      } else if (this.#deletes && r >= 0.95) {
        await this.#container.item(target.id, target.customerId).delete();
        this.#open.delete(target.id);
        this.stats.deletes++;
      } else {
        const order: Order = { ...target, status: 'cancelled', updatedAt: new Date().toISOString() };
        await this.#container.items.upsert(order);
        this.#open.delete(order.id);
        this.stats.cancels++;
      }
    } catch {
      // A failed write may or may not have landed; the final check reads the container, not this copy.
      this.stats.failures++;
      if (target) this.#open.delete(target.id);
    }
  }

  #pickOpen(busy: Set<string>): Order | undefined {
    // Recent orders change most, as in a shop; look back over the newest few hundred ids.
    for (let attempt = 0; attempt < 8; attempt++) {
      const id = `order-${Math.max(0, this.#next - 1 - Math.floor(this.#random() * 300))}`;
      const order = this.#open.get(id);
      if (order && !busy.has(id)) {
        busy.add(id);
        return order;
      }
    }
    return undefined;
  }

  #line(): OrderLine {
    return { sku: `sku-${Math.floor(this.#random() * 500)}`, qty: 1 + Math.floor(this.#random() * 3), priceCents: 100 + Math.floor(this.#random() * 9_900) };
  }

  #newOrder(): Order {
    const n = this.#next++;
    return {
      id: `order-${n}`,
      customerId: `customer-${Math.floor(this.#random() * this.#customers)}`,
      status: 'new',
      lines: [this.#line()],
      updatedAt: new Date().toISOString(),
    };
  }

  #evolve(order: Order): Order {
    const updatedAt = new Date().toISOString();
    if (order.status === 'new' && this.#random() < 0.6) return { ...order, lines: [...order.lines, this.#line()], updatedAt };
    if (order.status === 'new') return { ...order, status: 'paid', updatedAt };
    if (order.status === 'paid') return { ...order, status: 'shipped', updatedAt };
    return { ...order, lines: [...order.lines, this.#line()], updatedAt };
  }
}

/** How a view compares with the source's orders. */
export interface ViewComparison {
  readonly equal: boolean;
  /** Orders in the source. */
  readonly orders: number;
  /** Of which cancelled (expected absent from the view). */
  readonly cancelled: number;
  /** Rows in the view. */
  readonly rows: number;
  /** Open orders missing from the view. */
  readonly missing: readonly string[];
  /** View rows with no open order behind them. */
  readonly extra: readonly string[];
  /** View rows that differ from their order's summary. */
  readonly stale: readonly string[];
}

/** Compares the view with the summaries of every open order in the source. */
export function compareView(rows: readonly ViewRow<OrderSummary>[], orders: readonly Order[]): ViewComparison {
  const expected = new Map(orders.filter((o) => o.status !== 'cancelled').map((o) => [o.id, summarize(o)]));
  const seen = new Set<string>();
  const extra: string[] = [];
  const stale: string[] = [];
  for (const { key, row } of rows) {
    const want = expected.get(key);
    if (!want) extra.push(key);
    else {
      seen.add(key);
      if (!sameSummary(want, row)) stale.push(key);
    }
  }
  const missing = [...expected.keys()].filter((id) => !seen.has(id));
  return {
    equal: missing.length === 0 && extra.length === 0 && stale.length === 0,
    orders: orders.length,
    cancelled: orders.length - expected.size,
    rows: rows.length,
    missing,
    extra,
    stale,
  };
}

function sameSummary(a: OrderSummary, b: OrderSummary): boolean {
  return a.customer === b.customer && a.status === b.status && a.line_count === b.line_count && a.total_cents === b.total_cents;
}

/** Every order in the container, as stored now. */
export async function readAllOrders(container: Container): Promise<Order[]> {
  const { resources } = await container.items.readAll<Order>().fetchAll();
  return resources;
}
