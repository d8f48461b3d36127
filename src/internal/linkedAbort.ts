/** The signal of each {@link LinkedAbort} whose signal exists, so a signal given as a source finds its link. */
const links = new WeakMap<AbortSignal, LinkedAbort>();

/**
 * An abort signal that is aborted by `abort()` or when any of its sources is: what `AbortSignal.any([...])` gives,
 * at a fraction of its memory, for signals held as long as a lease is owned.
 *
 * Node's `AbortSignal.any` costs ≈ 1.5 KB over the signals it combines (a composite `EventTarget` with its two
 * listener maps, a `WeakRef` and a set on each side), and every `AbortController`'s signal ≈ 0.7 KB (its own
 * hidden class and two maps): a partition reader's ownership, feed, halting, handover and tracker signals came to
 * ≈ 5 KB a lease, most of an idle lease's heap beyond the SDK's. A link is a small object until its signal is
 * asked for (then one `AbortController`'s), and its sources hold it in an array.
 *
 * Same semantics as `AbortSignal.any`: a link made when a source is aborted already is aborted at once, with the
 * reason of the first aborted source in the order given; otherwise it aborts with the reason of the first source
 * to abort, right after that source's own 'abort' event and the `AbortSignal.any` signals over it (where Node
 * aborts a signal's dependants), links in the order they were made. A source that is not a link (nor a link's
 * signal) makes the link an ordinary `AbortSignal.any` of its sources and a controller of its own.
 *
 * @example
 * ```ts
 * const ownership = new LinkedAbort();
 * const feed = new LinkedAbort([ownership.signal]); // aborts with the ownership, or by feed.abort()
 * ownership.abort(new DOMException('lease lost', 'AbortError'));
 * feed.signal.aborted; // true, with the same reason
 * ```
 * @internal
 */
export class LinkedAbort {
  #controller: AbortController | undefined;
  /** The `AbortSignal.any` of the sources when one of them is not a link; `undefined` for a link of links. */
  readonly #native: AbortSignal | undefined;
  #aborted = false;
  #reason: unknown;
  /** Links over this one, aborted right after it, in the order they were made: the first, then the rest (most have one). */
  #follower: LinkedAbort | undefined;
  #followers: LinkedAbort[] | undefined;

  /** @param sources - signals (or links) whose abort aborts this one too; none: only `abort()` does. */
  constructor(sources: readonly (AbortSignal | LinkedAbort)[] = []) {
    const linked: LinkedAbort[] = [];
    for (const source of sources) {
      const link = source instanceof LinkedAbort ? source : links.get(source);
      if (link === undefined || link.#native !== undefined) {
        // Not all links: exactly what `AbortSignal.any` does, with a controller for `abort()`.
        this.#controller = new AbortController();
        this.#native = AbortSignal.any([...sources.map((s) => (s instanceof LinkedAbort ? s.signal : s)), this.#controller.signal]);
        return;
      }
      linked.push(link);
    }
    for (const link of linked) {
      if (!link.#aborted) continue;
      this.#aborted = true;
      this.#reason = link.#reason;
      return;
    }
    for (const link of linked) {
      if (link.#follower === undefined) link.#follower = this;
      else (link.#followers ??= []).push(this);
    }
  }

  /** Whether this link is aborted. */
  get aborted(): boolean {
    return this.#native ? this.#native.aborted : this.#aborted;
  }

  /** The signal (made when first asked for; aborted already if the link is). */
  get signal(): AbortSignal {
    if (this.#native) return this.#native;
    let controller = this.#controller;
    if (controller === undefined) {
      controller = this.#controller = new AbortController();
      links.set(controller.signal, this);
      if (this.#aborted) controller.abort(this.#reason);
    }
    return controller.signal;
  }

  /** Aborts the link (as `AbortController.abort`: the reason defaults to an `AbortError`), then the links over it; no-op when aborted. */
  abort(reason: unknown = new DOMException('This operation was aborted', 'AbortError')): void {
    if (this.#native) {
      this.#controller!.abort(reason);
      return;
    }
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    const follower = this.#follower;
    const followers = this.#followers;
    this.#follower = undefined;
    this.#followers = undefined;
    follower?.abort(reason);
    if (followers) for (const f of followers) f.abort(reason);
  }
}
