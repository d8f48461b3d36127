/**
 * `rxfeed/sse/client`: the browser side of a snapshot-mode hub, with no dependencies. It keeps a keyed map of the
 * view from the hub's events (`snapshot-begin`, `snapshot`, `up-to-date`, then changes) and tells you what changed,
 * as events or as an async iterable. Reconnection and `Last-Event-ID` are the `EventSource`'s own.
 *
 * @example
 * ```ts
 * import { LiveView } from 'rxfeed/sse/client';
 * const orders = new LiveView<OrderCard>(new EventSource('/events'));
 * for await (const update of orders.updates()) render(orders.rows);
 * ```
 */

/** The part of a browser `EventSource` (or a polyfill) the view listens to. */
export interface EventSourceLike {
  /** Calls `listener` for each event of `type` (`snapshot`, `change`, `up-to-date`, `reset`, `dropped`). */
  addEventListener(type: string, listener: (event: { readonly data: string; readonly lastEventId: string }) => void): void;
  /** Closes the connection; no reconnect follows. */
  close(): void;
}

/** A row or change as the hub sends it. */
interface Wire<D> {
  readonly id: string;
  readonly lsn: number;
  readonly partition: string;
  readonly operation?: 'create' | 'replace' | 'upsert' | 'delete';
  readonly data?: D;
}

/** What happened to the view. */
export type LiveViewUpdate<D> =
  /** A snapshot was loaded whole (first connection, or the server could not resume this one): `rows` replaced. */
  | { readonly type: 'snapshot'; readonly rows: ReadonlyMap<string, D>; readonly positions: Readonly<Record<string, number>> }
  /** One row was written (`data`) or removed (`data` undefined). */
  | { readonly type: 'change'; readonly id: string; readonly data: D | undefined; readonly lsn: number; readonly partition: string }
  /** A changes-only hub lost this client's position: load your state again (snapshot-mode hubs never send it). */
  | { readonly type: 'reset'; readonly reason: string };

/** Counters of a {@link LiveView}. */
export interface LiveViewStats {
  /** Snapshots loaded. */
  readonly snapshots: number;
  /** Changes applied after the snapshots. */
  readonly changes: number;
  /** Changes ignored because the row already had that version or a newer one (a hub never sends those). */
  readonly stale: number;
  /** Times the server ended the stream (`dropped`); the EventSource reconnects by itself. */
  readonly dropped: number;
}

/**
 * A keyed map kept up to date from a snapshot-mode hub's events.
 *
 * In short: `rows` holds the view as of the last `up-to-date` plus every change since; while a new snapshot is
 * streaming, `rows` keeps the previous state and is swapped whole once the snapshot is complete. A row whose
 * `data` is `null` or `undefined`, or a `delete`, removes the key.
 *
 * @example
 * ```ts
 * const view = new LiveView<Card>(new EventSource('/events'));
 * view.subscribe((update) => (update.type === 'change' ? patch(update.id, update.data) : renderAll(view.rows)));
 * ```
 */
export class LiveView<D = unknown> {
  /** The rows, by key. */
  rows: ReadonlyMap<string, D> = new Map();
  /** True once a snapshot was loaded (and after each later one). */
  ready = false;
  /** The last event id received: the position `rows` reflect. */
  lastEventId = '';
  readonly #source: EventSourceLike;
  readonly #listeners = new Set<(update: LiveViewUpdate<D>) => void>();
  /** Ends each running `updates()` iteration. */
  readonly #enders = new Set<() => void>();
  #versions = new Map<string, number>();
  #staging: { rows: Map<string, D>; versions: Map<string, number> } | undefined;
  #stats = { snapshots: 0, changes: 0, stale: 0, dropped: 0 };
  #closed = false;

  constructor(source: EventSourceLike) {
    this.#source = source;
    source.addEventListener('snapshot-begin', () => (this.#staging = { rows: new Map(), versions: new Map() }));
    source.addEventListener('snapshot', (event) => this.#rows(JSON.parse(event.data) as Wire<D>[]));
    source.addEventListener('up-to-date', (event) => this.#upToDate(event));
    source.addEventListener('message', (event) => this.#change(event));
    source.addEventListener('reset', (event) => this.#emit({ type: 'reset', reason: (JSON.parse(event.data) as { reason: string }).reason }));
    source.addEventListener('dropped', () => void this.#stats.dropped++);
  }

  /** Counters. */
  get stats(): LiveViewStats {
    return { ...this.#stats };
  }

  /** Calls `listener` with every update; returns a function that stops it. */
  subscribe(listener: (update: LiveViewUpdate<D>) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The updates from now on, as an async iterable (ends when the view is closed or the loop breaks). */
  updates(): AsyncIterableIterator<LiveViewUpdate<D>> {
    const queue: LiveViewUpdate<D>[] = [];
    let wake: (() => void) | undefined;
    let done = this.#closed;
    const stop = this.subscribe((update) => (queue.push(update), wake?.()));
    const end = () => {
      done = true;
      stop();
      wake?.();
    };
    this.#enders.add(end);
    const iterator: AsyncIterableIterator<LiveViewUpdate<D>> = {
      next: async () => {
        while (queue.length === 0 && !done) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        const value = queue.shift();
        return value ? { value, done: false } : { value: undefined, done: true };
      },
      return: async () => {
        end();
        this.#enders.delete(end);
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /** Closes the event source and ends every `updates()` iteration. */
  close(): void {
    this.#closed = true;
    this.#source.close();
    for (const end of this.#enders) end();
    this.#enders.clear();
    this.#listeners.clear();
  }

  #rows(items: readonly Wire<D>[]): void {
    const staging = this.#staging;
    if (!staging) return;
    for (const item of items) {
      if (item.data === null || item.data === undefined) continue;
      staging.rows.set(item.id, item.data);
      staging.versions.set(item.id, item.lsn);
    }
  }

  #upToDate(event: { readonly data: string; readonly lastEventId: string }): void {
    const staging = this.#staging ?? { rows: new Map<string, D>(), versions: new Map<string, number>() };
    this.#staging = undefined;
    this.rows = staging.rows;
    this.#versions = staging.versions;
    this.ready = true;
    this.lastEventId = event.lastEventId;
    this.#stats.snapshots++;
    const { positions } = JSON.parse(event.data) as { positions: Record<string, number> };
    this.#emit({ type: 'snapshot', rows: this.rows, positions });
  }

  #change(event: { readonly data: string; readonly lastEventId: string }): void {
    const change = JSON.parse(event.data) as Wire<D>;
    this.lastEventId = event.lastEventId;
    const version = this.#versions.get(change.id);
    if (version !== undefined && change.lsn <= version) {
      this.#stats.stale++;
      return;
    }
    this.#versions.set(change.id, change.lsn);
    const rows = this.rows as Map<string, D>;
    const data = change.operation === 'delete' || change.data === null ? undefined : change.data;
    if (data === undefined) rows.delete(change.id);
    else rows.set(change.id, data);
    this.#stats.changes++;
    this.#emit({ type: 'change', id: change.id, data, lsn: change.lsn, partition: change.partition });
  }

  #emit(update: LiveViewUpdate<D>): void {
    for (const listener of this.#listeners) listener(update);
  }
}
