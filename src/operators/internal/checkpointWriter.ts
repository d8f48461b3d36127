import type { SchedulerLike, Subscription } from 'rxjs';
import type { ChangeBatch } from '../../core/ChangeBatch.js';
import type { Position } from '../../core/Partition.js';
import type { PartitionTracker } from '../../core/PartitionTracker.js';
import { LeaseLostError } from '../../errors/index.js';

/** @internal When `checkpointEvery` writes: after `count` changes, `ms` after an acknowledgement, or both. */
export interface CheckpointPolicy {
  readonly count?: number;
  readonly ms?: number;
  readonly scheduler: SchedulerLike;
}

/** What is acknowledged and written for one partition (one ownership of its lease). */
interface PartitionState {
  /** Highest sequence acknowledged here. */
  sequence: number;
  position: Position;
  /** Changes acknowledged since the last write began. */
  pending: number;
  /** An acknowledged position is not yet written. */
  dirty: boolean;
  writing: boolean;
  /** Forgets the partition once its ownership ended and nothing is left to write. */
  forget: () => void;
}

/**
 * Where a subscription stands: `open` (acknowledging), `ending` (the stream ended or was unsubscribed: what was
 * acknowledged is being written, then `then` is called once), `ended`.
 */
type Phase = { readonly kind: 'open' } | { readonly kind: 'ending'; readonly then: () => void } | { readonly kind: 'ended' };

/**
 * @internal The checkpoints of one `checkpointEvery` subscription: acknowledges each batch that reached it and
 * writes each partition's position through its lease, by count, by time and at the end.
 *
 * Writes for one partition never overlap: a position acknowledged during a write is coalesced into the next one,
 * which starts when the write finishes if the count is reached (or the stream is ending), else on the timer.
 */
export class CheckpointWriter {
  readonly #policy: CheckpointPolicy;
  readonly #partitions = new Map<PartitionTracker, PartitionState>();
  #timer: Subscription | undefined;
  /** Writes in flight (and a flush while it starts them). */
  #writes = 0;
  #phase: Phase = { kind: 'open' };

  constructor(policy: CheckpointPolicy) {
    this.#policy = policy;
  }

  /** Acknowledges a batch's position to its partition's tracker, and writes it when the count is reached. */
  acknowledge(batch: ChangeBatch<unknown>): void {
    const origin = batch.origin;
    if (!origin) return;
    const tracker = origin.tracker;
    tracker.acknowledge(origin.sequence, batch.position);
    const state = this.#partitions.get(tracker) ?? this.#track(tracker, batch.position);
    if (origin.sequence <= state.sequence) return;
    state.sequence = origin.sequence;
    state.position = batch.position;
    state.dirty = true;
    state.pending += Math.max(1, origin.readCount);
    if (this.#countReached(state)) this.#write(tracker, state);
    else this.#armTimer();
  }

  /** The stream ended: writes what was acknowledged, then calls `then` once no write is in flight. */
  end(then: () => void): void {
    this.#phase = { kind: 'ending', then };
    this.#flush();
    this.#settle();
  }

  /**
   * Unsubscribed: still writes what was acknowledged (work that is done) if the stream had not ended; the writes
   * are tracked by the processor, whose stop() awaits them. Forgets the partitions with no write in flight.
   */
  dispose(): void {
    if (this.#phase.kind === 'open') {
      this.#phase = { kind: 'ending', then: () => undefined };
      this.#flush();
    }
    this.#timer?.unsubscribe();
    for (const state of [...this.#partitions.values()]) if (!state.writing) state.forget();
  }

  #countReached(state: PartitionState): boolean {
    return this.#policy.count !== undefined && state.pending >= this.#policy.count;
  }

  /** Calls the end once the stream is ending and no write is in flight. */
  #settle(): void {
    if (this.#phase.kind === 'ending' && this.#writes === 0) {
      const { then } = this.#phase;
      this.#phase = { kind: 'ended' };
      then();
    }
  }

  #write(tracker: PartitionTracker, state: PartitionState): void {
    if (state.writing) return; // coalesced: written when the current write finishes
    state.dirty = false;
    state.pending = 0;
    state.writing = true;
    this.#writes++;
    const finish = () => {
      state.writing = false;
      this.#writes--;
      if (state.dirty && (this.#phase.kind !== 'open' || this.#countReached(state))) this.#write(tracker, state);
      else if (state.dirty) this.#armTimer();
      this.#settle();
    };
    tracker.checkpoint(state.position).then(
      () => {
        finish();
        if (tracker.signal.aborted) state.forget();
      },
      (error: unknown) => {
        tracker.reportError(error instanceof Error ? error : new Error(String(error)));
        // The lease is gone: nothing more can be written for this ownership.
        if (error instanceof LeaseLostError) state.dirty = false;
        finish();
        if (error instanceof LeaseLostError || tracker.signal.aborted) state.forget();
      },
    );
  }

  /**
   * State for a partition seen for the first time. Once its ownership ends the state is dropped (after a write in
   * flight): the reader's drain wrote the final position, and later positions of an ended ownership cannot be
   * written anyway, so nothing grows with each rebalance.
   */
  #track(tracker: PartitionTracker, position: Position): PartitionState {
    const onEnd = () => {
      if (!state.writing) state.forget();
    };
    const state: PartitionState = {
      sequence: 0,
      position,
      pending: 0,
      dirty: false,
      writing: false,
      forget: () => {
        tracker.signal.removeEventListener('abort', onEnd);
        if (this.#partitions.get(tracker) === state) this.#partitions.delete(tracker);
      },
    };
    this.#partitions.set(tracker, state);
    if (tracker.signal.aborted) queueMicrotask(onEnd);
    else tracker.signal.addEventListener('abort', onEnd, { once: true });
    return state;
  }

  /** Writes every partition with an unwritten position. */
  #flush(): void {
    this.#timer?.unsubscribe();
    this.#timer = undefined;
    // Counted as a write while it starts the others, so a write that settles at once cannot end the stream (and
    // forget partitions) halfway through.
    this.#writes++;
    for (const [tracker, state] of [...this.#partitions]) if (state.dirty) this.#write(tracker, state);
    this.#writes--;
  }

  #armTimer(): void {
    const { ms, scheduler } = this.#policy;
    if (ms !== undefined && this.#timer === undefined && this.#phase.kind === 'open') this.#timer = scheduler.schedule(() => this.#flush(), ms);
  }
}
