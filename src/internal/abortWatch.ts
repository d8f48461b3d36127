/** The waits on one signal: their callbacks, and the signal's one 'abort' listener that calls them. */
interface Watch {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
  /** The listener is on the signal (not for a signal of an {@link AnnouncedAbortController}: its `abort()` calls it). */
  readonly listening: boolean;
}

const watched = new WeakMap<AbortSignal, Watch>();
/** Signals of {@link AnnouncedAbortController}s: their waits need no 'abort' listener. */
const announced = new WeakSet<AbortSignal>();
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
  let watch = watched.get(signal);
  if (!watch) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      watched.delete(signal);
      const due = [...callbacks];
      callbacks.clear();
      for (const callback of due) callback();
    };
    const listening = !announced.has(signal);
    watch = { callbacks, listener, listening };
    watched.set(signal, watch);
    if (listening) signal.addEventListener('abort', listener, { once: true });
  }
  // A wrapper per wait, so the same function can watch twice and each stop removes only its own.
  const entry = () => fn();
  const current = watch;
  current.callbacks.add(entry);
  return () => {
    if (!current.callbacks.delete(entry) || current.callbacks.size > 0) return;
    if (current.listening) signal.removeEventListener('abort', current.listener);
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

  constructor() {
    announced.add(this.signal);
  }

  /** Aborts the signal (its 'abort' event, then the waits watching it); no-op when aborted already. */
  abort(reason?: unknown): void {
    if (this.signal.aborted) return;
    this.#controller.abort(reason);
    watched.get(this.signal)?.listener();
  }
}

/**
 * How many waits are watching `signal` now (0 when none); for tests.
 *
 * @internal
 */
export function abortWatchers(signal: AbortSignal): number {
  return watched.get(signal)?.callbacks.size ?? 0;
}

/** @internal What an operation aborted by `signal` rejects with: the signal's reason, else a DOMException `AbortError`. */
export function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

/** @internal True when `err` is the rejection of an aborted signal (ours, Node's or a client library's). */
export function isAbortError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || (err as { code?: unknown }).code === 'ABORT_ERR');
}

