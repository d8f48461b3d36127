/** Callbacks of the waits on one signal; the signal's one 'abort' listener calls them. */
const watched = new WeakMap<AbortSignal, Set<() => void>>();
const noop = (): void => undefined;

/**
 * Calls `fn` once when `signal` aborts, until the returned function is called (call it when the wait ends).
 * If `signal` is aborted already, `fn` is not called: check `signal.aborted` first.
 *
 * All waits on one signal share a single 'abort' listener, added the first time the signal is watched and
 * kept for the signal's life, with a set of the waits' callbacks. Many waits on one signal (every partition
 * reader waiting on its processor's, or one reader's successive sleeps) therefore neither pile up listeners
 * (no `MaxListenersExceededWarning`) nor add and remove one per wait (each add scans the signal's listener
 * list). A callback is dropped from the set when its wait ends or when it is called: nothing outlives its wait.
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
  let callbacks = watched.get(signal);
  if (!callbacks) {
    const set = new Set<() => void>();
    callbacks = set;
    watched.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        const due = [...set];
        set.clear();
        for (const callback of due) callback();
      },
      { once: true },
    );
  }
  // A wrapper per wait, so the same function can watch twice and each stop removes only its own.
  const entry = () => fn();
  callbacks.add(entry);
  const set = callbacks;
  return () => {
    set.delete(entry);
  };
}

/**
 * How many waits are watching `signal` now (0 when none); for tests.
 *
 * @internal
 */
export function abortWatchers(signal: AbortSignal): number {
  return watched.get(signal)?.size ?? 0;
}
