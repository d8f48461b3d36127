import { Observable, share, Subject, take, type Subscriber } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { shareFanOut } from '../../src/internal/shareFanOut.js';

/** A source that records its subscriptions and lets the test drive its subscriber. */
function recordingSource() {
  const log: string[] = [];
  const subscribers: Subscriber<number>[] = [];
  const source = new Observable<number>((subscriber) => {
    log.push(`subscribe ${subscribers.length + 1}`);
    subscribers.push(subscriber);
    return () => log.push(`teardown ${subscribers.indexOf(subscriber) + 1}`);
  });
  return { log, subscribers, source };
}

/** What two subscribers and the source see through `shared`, in one script. */
function script(make: (source: Observable<number>) => Observable<number>): string[] {
  const { log, subscribers, source } = recordingSource();
  const shared = make(source);
  const a = shared.subscribe({ next: (v) => log.push(`a ${v}`), complete: () => log.push('a done') });
  subscribers[0]!.next(1);
  const b = shared.subscribe({ next: (v) => log.push(`b ${v}`), error: (e: Error) => log.push(`b error ${e.message}`) });
  subscribers[0]!.next(2);
  a.unsubscribe();
  subscribers[0]!.next(3);
  b.unsubscribe(); // the last one: the source is unsubscribed
  shared.subscribe({ next: (v) => log.push(`c ${v}`), complete: () => log.push('c done') });
  subscribers[1]!.next(4);
  subscribers[1]!.complete(); // resets: the next subscriber subscribes afresh
  subscribers[1]!.next(5); // ignored: the source's subscriber stopped
  shared.subscribe({ next: (v) => log.push(`d ${v}`), error: (e: Error) => log.push(`d error ${e.message}`) });
  shared.subscribe({ next: (v) => log.push(`e ${v}`), error: (e: Error) => log.push(`e error ${e.message}`) });
  subscribers[2]!.next(6);
  subscribers[2]!.error(new Error('boom'));
  shared.pipe(take(0)).subscribe(); // closed at once: never subscribes the source
  return log;
}

describe('shareFanOut', () => {
  it("shares one subscription of the source as share() does: joins, leaves, the last one leaving, completion, errors", () => {
    const ours = script(shareFanOut);
    expect(ours).toEqual(script((source) => source.pipe(share())));
    expect(ours).toEqual([
      'subscribe 1',
      'a 1',
      'a 2',
      'b 2',
      'b 3',
      'teardown 1',
      'subscribe 2',
      'c 4',
      'c done',
      'teardown 2',
      'subscribe 3',
      'd 6',
      'e 6',
      'd error boom',
      'e error boom',
      'teardown 3',
    ]);
  });

  it('hands a value to the subscribers there when it came: one joining meanwhile gets the next one, one leaving gets it', () => {
    const run = (make: (source: Observable<number>) => Observable<number>) => {
      const source = new Subject<number>();
      const shared = make(source);
      const log: string[] = [];
      let late: { unsubscribe(): void } | undefined;
      const first = shared.subscribe((v) => {
        log.push(`first ${v}`);
        if (v === 1) late = shared.subscribe((w) => log.push(`late ${w}`));
        if (v === 2) second.unsubscribe();
      });
      const second = shared.subscribe((v) => log.push(`second ${v}`));
      source.next(1);
      source.next(2);
      source.next(3);
      first.unsubscribe();
      late?.unsubscribe();
      return log;
    };
    expect(run(shareFanOut)).toEqual(run((source) => source.pipe(share())));
    expect(run(shareFanOut)).toEqual(['first 1', 'second 1', 'first 2', 'late 2', 'first 3', 'late 3']);
  });
});
