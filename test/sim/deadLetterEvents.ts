import type { FeedEvent } from '../../src/core/events.js';
import type { DeadLetter, DeadLetterWriter } from '../../src/deadletter/DeadLetter.js';
import type { DeadLetterSink } from '../../src/deadletter/DeadLetterSink.js';
import type { Sim } from './context.js';
import type { Doc, World } from './world.js';

/** A dead-letter write whose reply came back to the host that made it: the store holds its letters. */
interface Answered {
  readonly lease: string;
  readonly lsns: string;
  /** `id@lsn` of its letters. */
  readonly keys: readonly string[];
  readonly atMs: number;
}

/**
 * What the `deadLettered` event (`events$`) promises, checked against the dead-letter store each host sees
 * (its own wrapper, outermost: between the product and the host's gate, the faults and the shared store):
 *
 * - `dead-letter-announced-not-stored`: a host announced letters (a lease and its LSNs) no write of its whose
 *   reply came back held: nothing is announced that the store did not accept (a write that failed, or whose
 *   reply was lost, is no announcement);
 * - `dead-letter-not-announced`: a write whose reply came back to its host was not announced by one
 *   `deadLettered` event of that host, with its lease and LSNs, by the next tick (the event follows the reply
 *   at once); announced twice shows as the first invariant, as no second write is left to match;
 * - at quiescence, `dead-letter-never-announced`: a letter the store holds whose change no host announced. A
 *   write whose reply was lost is retried while the partition is owned and announced when a retry's reply
 *   comes back; if the ownership ends first, the letters stay stored unannounced by that host, and the next
 *   owner, reading the change again (the checkpoint never passes it), writes and announces it under its own
 *   lease: so every stored change is announced by some host, but not necessarily the one, nor the lease, that
 *   first stored it. Excused: in latestVersion mode, a version superseded since (a read skips it: nobody writes
 *   it again; seed 100 of `--faults all`), changes written before the start (an `admin` reset under a start
 *   other than `'beginning'` may never read them again) and changes behind a halted partition.
 *
 * It draws nothing, and its wrapper returns the store's own promise (no extra turn): runs replay as before.
 */
export class DeadLetterEvents {
  /** Writes answered and not announced yet, per host. */
  readonly #answered = new Map<string, Answered[]>();
  /** `id@lsn` of every change announced. */
  readonly #announced = new Set<string>();
  #events = 0;

  constructor(
    private readonly sim: Sim,
    private readonly world: World,
  ) {}

  /** Host `name`'s dead-letter sink, watched: records each write whose reply came back. */
  watch(name: string, sink: DeadLetterSink<Doc>): DeadLetterSink<Doc> {
    return {
      get description() {
        return sink.description;
      },
      write: (letters: readonly DeadLetter<Doc>[], writer: DeadLetterWriter) => {
        const written = sink.write(letters, writer);
        written.then(
          () => this.#answer(name, letters, writer),
          () => undefined,
        );
        return written;
      },
    };
  }

  #answer(name: string, letters: readonly DeadLetter<Doc>[], writer: DeadLetterWriter): void {
    let answered = this.#answered.get(name);
    if (!answered) this.#answered.set(name, (answered = []));
    answered.push({ lease: writer.leaseToken, lsns: letters.map((l) => l.lsn).join(','), keys: letters.map((l) => `${l.documentId}@${l.lsn}`), atMs: this.sim.clock.now() });
  }

  /** A host's event: a `deadLettered` one must match a write of that host whose reply came back. */
  onEvent(name: string, event: FeedEvent): void {
    if (event.type !== 'deadLettered') return;
    this.#events++;
    const answered = this.#answered.get(name) ?? [];
    const lsns = event.lsns.join(',');
    const at = answered.findIndex((a) => a.lease === event.lease && a.lsns === lsns);
    if (at < 0) {
      this.sim.violations.report('dead-letter-announced-not-stored', `${name} announced lsns ${lsns} of ${event.lease} dead-lettered, but no write of its with those letters came back from the store`, `announced:${name}:${event.lease}:${lsns}`);
      return;
    }
    for (const key of answered[at]!.keys) this.#announced.add(key);
    answered.splice(at, 1);
  }

  /** After every tick: a write answered before this tick and not announced. */
  check(): void {
    const now = this.sim.clock.now();
    for (const [name, answered] of this.#answered) {
      const late = answered.find((a) => a.atMs < now);
      if (late) {
        this.sim.violations.report('dead-letter-not-announced', `${name}'s dead-letter write of lsns ${late.lsns} of ${late.lease} came back ${Math.round(now - late.atMs)} ms ago and no deadLettered event of its announced it`, `unannounced:${name}:${late.lease}:${late.lsns}`);
        answered.splice(answered.indexOf(late), 1);
      }
    }
  }

  /** At quiescence: `dead-letter-never-announced`; then the counts into the run's stats. */
  finish(stored: readonly DeadLetter<Doc>[]): void {
    this.check();
    const { world } = this;
    // In latestVersion mode a version read again is read only while it is its document's latest (seed 100).
    const readAgain = (l: DeadLetter<Doc>) => world.mode === 'allVersionsAndDeletes' || world.latestKey.get(l.documentId) === `${l.documentId}@${l.lsn}`;
    const never = stored
      .filter(readAgain)
      .map((l) => `${l.documentId}@${l.lsn}`)
      .filter((key) => !this.#announced.has(key) && !world.isBeforeStart(key) && !world.excused(key));
    if (never.length > 0) {
      this.sim.violations.report('dead-letter-never-announced', `${never.length} changes the dead-letter store holds were never announced by a deadLettered event, e.g. ${never.slice(0, 3).join(', ')}`);
    }
    this.sim.tally('deadLetter.events', this.#events);
  }
}
