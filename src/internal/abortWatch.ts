/** The waits on one signal: their callbacks, and the signal's one 'abort' listener that calls them. */
interface Watch {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const watched = new WeakMap<AbortSignal, Watch>();
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

