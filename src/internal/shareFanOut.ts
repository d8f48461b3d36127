import { Observable, Subscription, type Observer, type Subscriber, type TeardownLogic } from 'rxjs';

/**
 * One subscription of a source shared by every subscriber: what rxjs's `share()` does with its defaults
 * (the source is subscribed by the first subscriber, unsubscribed when the last one leaves, and subscribed
 * afresh after it completed or failed), in fewer calls per value. `share()` hands each value through a
 * `SafeSubscriber`, its observer, a closure, a `Subject` and its error context before the subscribers get it;
 * here the source calls the {@link FanOut} itself (rxjs takes an object that is both an observer and a
 * `Subscription` as the subscriber, unwrapped), which calls each subscriber: one call, one loop.
 *
 * Values reach the subscribers in the order they subscribed; one subscribing while a value is handed out does
 * not get that value, one leaving does (a closed subscriber ignores it), as with a `Subject`.
 *
 * @internal
 */
export function sharedSubscribe<T>(source: Observable<T>): (subscriber: Subscriber<T>) => TeardownLogic {
  let current: FanOut<T> | undefined;
  return (subscriber) => {
    let fan = current;
    const first = fan === undefined;
    if (fan === undefined) {
      const made = new FanOut<T>(() => {
        // Completed or failed: the next subscriber subscribes the source again (share's reset, before the end is handed out).
        if (current === made) current = undefined;
      });
      fan = current = made;
    }
    const joined = fan;
    joined.join(subscriber);
    subscriber.add(() => {
      if (joined.leave(subscriber) > 0 || current !== joined) return;
      // The last subscriber left: the source is unsubscribed, and the next subscriber subscribes it again.
      current = undefined;
      joined.unsubscribe();
    });
    // A subscriber closed at once (it left above) does not start the source.
    if (first && current === joined) source.subscribe(joined);
  };
}

/** {@link sharedSubscribe} as an Observable: `source.pipe(share())`, in fewer calls per value. @internal */
export function shareFanOut<T>(source: Observable<T>): Observable<T> {
  return new Observable<T>(sharedSubscribe(source));
}

/**
 * The one subscriber of a shared source: hands every notification to the subscribers joined, stops at the
 * first `error` or `complete` (then unsubscribes from the source, as a `Subscriber` does), and ignores what
 * comes after.
 */
class FanOut<T> extends Subscription implements Observer<T> {
  /** Replaced, never changed in place: a loop handing out a value keeps the subscribers it started with. */
  #subscribers: readonly Subscriber<T>[] = [];
  #stopped = false;
  readonly #ended: () => void;

  constructor(ended: () => void) {
    super();
    this.#ended = ended;
  }

  join(subscriber: Subscriber<T>): void {
    this.#subscribers = [...this.#subscribers, subscriber];
  }

  /** Removes `subscriber`; returns how many are left. */
  leave(subscriber: Subscriber<T>): number {
    this.#subscribers = this.#subscribers.filter((s) => s !== subscriber);
    return this.#subscribers.length;
  }

  next(value: T): void {
    if (this.#stopped) return;
    const subscribers = this.#subscribers;
    if (subscribers.length === 1) subscribers[0]!.next(value);
    else for (const subscriber of subscribers) subscriber.next(value);
  }

  error(error: unknown): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#ended();
    try {
      for (const subscriber of this.#subscribers) subscriber.error(error);
    } finally {
      this.unsubscribe();
    }
  }

  complete(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#ended();
    try {
      for (const subscriber of this.#subscribers) subscriber.complete();
    } finally {
      this.unsubscribe();
    }
  }

  override unsubscribe(): void {
    this.#stopped = true;
    super.unsubscribe();
  }
}
