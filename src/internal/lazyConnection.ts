/**
 * @internal A connection (or channel, or client) opened on first use and shared by every caller until it is
 * forgotten: the broker publishers' and the Redis view store's one memoized connection.
 *
 * A failed open is forgotten at once, so the next caller opens again; a connection that dropped is forgotten
 * by whoever hears of the drop ({@link LazyConnection.forget}); closing takes it out
 * ({@link LazyConnection.take}).
 *
 * @example
 * ```ts
 * const connection = new LazyConnection(() => amqp.connect(url));
 * const channel = await (await connection.get()).createConfirmChannel();
 * await (await connection.take()?.catch(() => undefined))?.close();
 * ```
 */
export class LazyConnection<C> {
  #current: Promise<C> | undefined;

  /**
   * @param open opens a connection; called by the first `get()` and again by the first one after a failure or a
   *   `forget()`.
   */
  constructor(private readonly open: () => Promise<C>) {}

  /** The current connection, opening one when there is none. */
  get(): Promise<C> {
    this.#current ??= this.open().catch((error: unknown) => {
      this.#current = undefined;
      throw error;
    });
    return this.#current;
  }

  /** Drops the current connection (without closing it): the next `get()` opens a new one. */
  forget(): void {
    this.#current = undefined;
  }

  /** Takes the current connection out, if there is one (to close it): the next `get()` opens a new one. */
  take(): Promise<C> | undefined {
    const current = this.#current;
    this.#current = undefined;
    return current;
  }
}
