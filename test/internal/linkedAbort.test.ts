import { describe, expect, it } from 'vitest';
import { LinkedAbort } from '../../src/internal/linkedAbort.js';

/** What listeners saw: `name:reason` in the order the 'abort' events came. */
type Log = string[];

/** A reader's signals as `AbortSignal.any` made them (before links): ownership, feed, tracker, the end's wait. */
function withAny(log: Log) {
  const owned = new AbortController();
  const handedOver = new AbortController();
  const halting = new AbortController();
  const detached = new AbortController();
  const feed = AbortSignal.any([owned.signal, handedOver.signal]);
  const tracker = AbortSignal.any([owned.signal, halting.signal, handedOver.signal]);
  let stopped: AbortSignal | undefined;
  return {
    owned: (r: string) => owned.abort(r),
    handOver: (r: string) => handedOver.abort(r),
    halt: (r: string) => halting.abort(r),
    detach: (r: string) => detached.abort(r),
    feed: () => feed,
    tracker: () => tracker,
    ownedSignal: () => owned.signal,
    stopped: () => (stopped ??= AbortSignal.any([owned.signal, detached.signal])),
    log,
  };
}

/** The same signals as links. */
function withLinks(log: Log) {
  const owned = new LinkedAbort();
  const feed = new LinkedAbort([owned.signal]);
  const tracker = new LinkedAbort([feed]);
  const detached = new LinkedAbort();
  let stopped: LinkedAbort | undefined;
  return {
    owned: (r: string) => owned.abort(r),
    handOver: (r: string) => feed.abort(r),
    halt: (r: string) => tracker.abort(r),
    detach: (r: string) => detached.abort(r),
    feed: () => feed.signal,
    tracker: () => tracker.signal,
    ownedSignal: () => owned.signal,
    stopped: () => (stopped ??= new LinkedAbort([owned.signal, detached])).signal,
    log,
  };
}

type Setup = ReturnType<typeof withAny>;
type Step = (s: Setup) => void;

const watch = (name: 'feed' | 'tracker' | 'ownedSignal' | 'stopped'): Step => (s) => {
  const signal = s[name]();
  if (signal.aborted) s.log.push(`${name} born aborted:${String(signal.reason)}`);
  else signal.addEventListener('abort', () => s.log.push(`${name}:${String(signal.reason)}`));
};
/** A user's `AbortSignal.any` over the tracker's signal (a sink's retry wait). */
const userAny: Step = (s) => {
  const any = AbortSignal.any([new AbortController().signal, s.tracker()]);
  if (any.aborted) s.log.push(`user born aborted:${String(any.reason)}`);
  else any.addEventListener('abort', () => s.log.push(`user:${String(any.reason)}`));
};
const steps: Record<string, Step> = {
  owned: (s) => s.owned('lost'),
  handOver: (s) => s.handOver('gone'),
  halt: (s) => s.halt('halted'),
  detach: (s) => s.detach('left'),
  watchFeed: watch('feed'),
  watchTracker: watch('tracker'),
  watchOwned: watch('ownedSignal'),
  watchStopped: watch('stopped'),
  userAny,
};

function run(make: (log: Log) => Setup, plan: readonly string[]): Log {
  const s = make([]);
  for (const step of plan) steps[step]!(s);
  // Whatever was not watched: its state at the end.
  for (const name of ['feed', 'tracker', 'ownedSignal'] as const) s.log.push(`${name} end ${s[name]().aborted}:${String(s[name]().reason)}`);
  return s.log;
}

describe('LinkedAbort', () => {
  it('aborts with its sources, after their own events and in the order AbortSignal.any does, with the same reasons', () => {
    const names = Object.keys(steps);
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let i = 0; i < 400; i++) {
      const plan = Array.from({ length: 3 + (next() % 6) }, () => names[next() % names.length]!);
      // The one difference (below): a user's AbortSignal.any over the tracker's made after the end's wait.
      const stoppedAt = plan.indexOf('watchStopped');
      if (stoppedAt !== -1 && plan.lastIndexOf('userAny') > stoppedAt) continue;
      expect(run(withLinks as (log: Log) => Setup, plan), plan.join(' ')).toEqual(run(withAny, plan));
    }
  });

  it("differs from AbortSignal.any in one order: a user's AbortSignal.any over a link aborts with the link, before links over the source made earlier", () => {
    const plan = ['watchStopped', 'userAny', 'owned'];
    expect(run(withAny, plan).slice(0, 2)).toEqual(['stopped:lost', 'user:lost']);
    expect(run(withLinks as (log: Log) => Setup, plan).slice(0, 2)).toEqual(['user:lost', 'stopped:lost']);
  });

  it('makes its signal only when asked for, aborted already if the link is', () => {
    const owned = new LinkedAbort();
    const feed = new LinkedAbort([owned]);
    owned.abort(new Error('lost'));
    expect(feed.aborted).toBe(true);
    expect(feed.signal.aborted).toBe(true);
    expect((feed.signal.reason as Error).message).toBe('lost');
    const late = new LinkedAbort([owned.signal]);
    expect((late.signal.reason as Error).message).toBe('lost');
  });

  it('is an AbortSignal.any of its sources when one is not a link', () => {
    const plain = new AbortController();
    const link = new LinkedAbort([plain.signal]);
    const over = new LinkedAbort([link]);
    const seen: string[] = [];
    over.signal.addEventListener('abort', () => seen.push(`over:${String(over.signal.reason)}`));
    link.signal.addEventListener('abort', () => seen.push(`link:${String(link.signal.reason)}`));
    plain.abort('x');
    expect(seen).toEqual(['link:x', 'over:x']); // both depend on `plain` (AbortSignal.any flattens), in the order made
  });

  it('defaults the reason to an AbortError, and a second abort changes nothing', () => {
    const link = new LinkedAbort();
    link.abort();
    expect((link.signal.reason as DOMException).name).toBe('AbortError');
    link.abort('later');
    expect((link.signal.reason as DOMException).name).toBe('AbortError');
  });
});
