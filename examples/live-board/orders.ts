/**
 * @summary The live board's orders: the document written to Cosmos DB, the card a browser gets (a projection,
 * never the whole document), and a writer that moves orders through the kitchen.
 */
import type { Container } from '@azure/cosmos';

/** Where an order is; `delivered` and `cancelled` orders leave the board. */
export type OrderStatus = 'new' | 'paid' | 'packed' | 'shipped' | 'delivered' | 'cancelled';

/** An order document (partition key `/customer`). */
export interface Order {
  readonly id: string;
  readonly customer: string;
  readonly city: string;
  readonly items: readonly { readonly name: string; readonly qty: number; readonly priceCents: number }[];
  readonly status: OrderStatus;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Internal notes: never sent to browsers (the projection leaves them out). */
  readonly internalNotes?: string;
}

/** What a browser gets per order. */
export interface OrderCard {
  readonly customer: string;
  readonly city: string;
  readonly status: OrderStatus;
  readonly items: number;
  readonly summary: string;
  readonly totalCents: number;
  readonly updatedAt: string;
}

/** The projection every board client gets. */
export function toCard(order: Order): OrderCard {
  return {
    customer: order.customer,
    city: order.city,
    status: order.status,
    items: order.items.reduce((n, i) => n + i.qty, 0),
    summary: order.items.map((i) => `${i.qty}× ${i.name}`).join(', '),
    totalCents: order.items.reduce((sum, i) => sum + i.qty * i.priceCents, 0),
    updatedAt: order.updatedAt,
  };
}


const CUSTOMERS = ['Ada', 'Grace', 'Linus', 'Margaret', 'Dennis', 'Barbara', 'Ken', 'Frances', 'Edsger', 'Radia', 'Tim', 'Katherine'];
const CITIES = ['Lisbon', 'Oslo', 'Lyon', 'Kraków', 'Porto', 'Ghent', 'Turin', 'Bergen', 'Leeds', 'Graz'];
const MENU = [
  { name: 'Espresso beans', priceCents: 1450 },
  { name: 'Pour-over kit', priceCents: 3900 },
  { name: 'Ceramic mug', priceCents: 1200 },
  { name: 'Grinder', priceCents: 8900 },
  { name: 'Oat milk', priceCents: 290 },
  { name: 'Filter papers', priceCents: 550 },
  { name: 'Kettle', priceCents: 5600 },
  { name: 'Tea sampler', priceCents: 2100 },
];
const NEXT: Partial<Record<OrderStatus, OrderStatus>> = { new: 'paid', paid: 'packed', packed: 'shipped', shipped: 'delivered' };

/** A small deterministic random source (mulberry32). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Writes orders: new ones while fewer than `maxOpen` are open, otherwise one open order moves a step
 * (new → paid → packed → shipped → delivered), now and then one is cancelled.
 */
export class OrderWriter {
  readonly #open = new Map<string, Order>();
  readonly #random: () => number;
  #next = 1;
  writes = 0;

  constructor(
    readonly container: Container,
    readonly options: { seed?: number; maxOpen?: number; now?: () => number } = {},
  ) {
    this.#random = seeded(options.seed ?? 7);
  }

  /** The orders the writer left open (what the board should show). */
  openOrders(): ReadonlyMap<string, Order> {
    return this.#open;
  }

  #pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.#random() * list.length)]!;
  }

  /** Creates a new order. */
  async create(): Promise<Order> {
    const now = new Date(this.options.now?.() ?? Date.now()).toISOString();
    const lines = 1 + Math.floor(this.#random() * 3);
    const menu = [...MENU];
    const items = Array.from({ length: lines }, () => ({ ...menu.splice(Math.floor(this.#random() * menu.length), 1)[0]!, qty: 1 + Math.floor(this.#random() * 3) }));
    const order: Order = {
      id: `A-${String(this.#next++).padStart(4, '0')}`,
      customer: this.#pick(CUSTOMERS),
      city: this.#pick(CITIES),
      items,
      status: 'new',
      createdAt: now,
      updatedAt: now,
      internalNotes: 'fraud score 0.02',
    };
    return this.#write(order);
  }

  /** One step of the board: a new order, a status move or a cancellation. */
  async step(): Promise<Order> {
    const open = [...this.#open.values()];
    if (open.length < (this.options.maxOpen ?? 24) && (open.length < 6 || this.#random() < 0.45)) return this.create();
    const order = this.#pick(open);
    const status = this.#random() < 0.06 && order.status !== 'shipped' ? 'cancelled' : NEXT[order.status]!;
    return this.#write({ ...order, status, updatedAt: new Date(this.options.now?.() ?? Date.now()).toISOString() });
  }

  async #write(order: Order): Promise<Order> {
    await this.container.items.upsert(order);
    this.writes++;
    if (order.status === 'delivered' || order.status === 'cancelled') this.#open.delete(order.id);
    else this.#open.set(order.id, order);
    return order;
  }
}
