/** The waits on one signal: their callbacks, and the signal's one 'abort' listener that calls them. */
interface Watch {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const watched = new WeakMap<AbortSignal, Watch>();
/** Signals of {@link AnnouncedAbortController}s, with their controller: it keeps their waits (no 'abort' listener, no {@link Watch}). */
const announced = new WeakMap<AbortSignal, AnnouncedAbortController>();
const noop = (): void => undefined;

/**
 * Calls `fn` once when `signal` aborts, until the returned function is called (call it when the wait ends).
 * If `signal` is aborted already, `fn` is not called: check `signal.aborted` first.
 *
 * All waits on one signal share a single 'abort' listener, with a set of the waits' callbacks: many waits on
 * one signal (every partition reader waiting on its processor's, a sleep and a read on one reader's) neither
 * pile up listeners (no `MaxListenersExceededWarning`) nor make each add scan a long listener list. A
 * callback leaves the set when its wait ends or when it is called, and the listener leaves the signal with
 * the last one, so a signal that outlives its waits (a reader's, between polls) keeps nothing: ~1.5 KB per
 * signal were a kept listener and set, ~3 MB for a host reading 1,024 partitions.
 *
 * @example
 * ```ts
 * const stop = onAbort(signal, () => { timer.unsubscribe(); resolve(); });
 * // ... when the wait ends another way:
 * stop();
 * ```
 * @internal
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) return noop;
  const controller = announced.get(signal);
  if (controller !== undefined) return controller.watch(fn);
  let watch = watched.get(signal);
  if (!watch) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      watched.delete(signal);
      const due = [...callbacks];
      callbacks.clear();
      for (const callback of due) callback();
    };
    watch = { callbacks, listener };
    watched.set(signal, watch);
    signal.addEventListener('abort', listener, { once: true });
  }
  // A wrapper per wait, so the same function can watch twice and each stop removes only its own.
  const entry = () => fn();
  const current = watch;
  current.callbacks.add(entry);
  return () => {
    if (!current.callbacks.delete(entry) || current.callbacks.size > 0) return;
    signal.removeEventListener('abort', current.listener);
    if (watched.get(signal) === current) watched.delete(signal);
  };
}

/**
 * An `AbortController` whose own `abort()` calls the waits {@link onAbort} registered on its signal (right after
 * the signal's 'abort' event), so those waits add no 'abort' listener to it. For a signal that is watched
 * briefly and often, and aborted only through this controller: a partition reader's read signal, watched by
 * the source for every read (adding and removing an event listener each time is most of an idle poll's cost
 * of watching it). The signal is an ordinary `AbortSignal` to everyone else.
 *
 * @example
 * ```ts
 * const controller = new AnnouncedAbortController();
 * const stop = onAbort(controller.signal, () => console.log('aborted')); // no listener on the signal
 * controller.abort(); // logs 'aborted'
 * ```
 * @internal
 */
export class AnnouncedAbortController {
  readonly #controller = new AbortController();
  readonly signal: AbortSignal = this.#controller.signal;
  /**
   * The waits on the signal, in the order they began: the first two in slots of their own (most often the
   * only ones: the read in flight; or a reader's read deadline, there for good, and a poll's sleep), any more in
   * a set made while there are. A wait goes to a slot only when no later one holds a wait, so the slots' waits
   * are always the oldest, in order. Nothing is kept between waits.
   */
  #first: (() => void) | undefined;
  #second: (() => void) | undefined;
  #more: Set<() => void> | undefined;

  constructor() {
    announced.set(this.signal, this);
  }

  /** @internal {@link onAbort} on this controller's signal (not aborted yet). */
  watch(fn: () => void): () => void {
    // A wrapper per wait, so the same function can watch twice and each stop removes only its own.
    const entry = () => fn();
    if (this.#more === undefined && this.#second === undefined) {
      if (this.#first === undefined) {
        this.#first = entry;
        return () => {
          if (this.#first === entry) this.#first = undefined;
        };
      }
      this.#second = entry;
      return () => {
        if (this.#second === entry) this.#second = undefined;
      };
    }
    const more = (this.#more ??= new Set());
    more.add(entry);
    return () => {
      if (more.delete(entry) && more.size === 0 && this.#more === more) this.#more = undefined;
    };
  }

  /** @internal How many waits watch the signal now. */
  get watchers(): number {
    return (this.#first === undefined ? 0 : 1) + (this.#second === undefined ? 0 : 1) + (this.#more?.size ?? 0);
  }

  /** Aborts the signal (its 'abort' event, then the waits watching it, oldest first); no-op when aborted already. */
  abort(reason?: unknown): void {
    if (this.signal.aborted) return;
    this.#controller.abort(reason);
    const first = this.#first;
    const second = this.#second;
    const more = this.#more;
    this.#first = undefined;
    this.#second = undefined;
    this.#more = undefined;
    first?.();
    second?.();
    if (more !== undefined) for (const callback of [...more]) callback();
  }
}

/**
 * How many waits are watching `signal` now (0 when none); for tests.
 *
 * @internal
 */
export function abortWatchers(signal: AbortSignal): number {
  return announced.get(signal)?.watchers ?? watched.get(signal)?.callbacks.size ?? 0;
}

/** @internal What an operation aborted by `signal` rejects with: the signal's reason, else a DOMException `AbortError`. */
export function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

/** @internal True when `err` is the rejection of an aborted signal (ours, Node's or a client library's). */
export function isAbortError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || (err as { code?: unknown }).code === 'ABORT_ERR');
}

/**
 * Settles with `promise`, or rejects with {@link abortError} as soon as `signal` aborts: for a call that takes
 * no signal of its own (the SDK's change feed iterator). An already aborted signal rejects at once, and the
 * promise's own rejection is then ignored.
 *
 * @internal
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(abortError(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const stopWatching = onAbort(signal, () => reject(abortError(signal)));
    promise.then(
      (value) => {
        stopWatching();
        resolve(value);
      },
      (err: unknown) => {
        stopWatching();
        reject(err);
      },
    );
  });
}
