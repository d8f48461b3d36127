import type { ChangeBatch } from '../../core/ChangeBatch.js';

/**
 * @internal One lease token's re-reads that its hub does not publish (a range read before under other tokens, at
 * different positions, as an admin reset or rewind makes, re-read from below the furthest of them): the one still
 * open, if any, and how far the hub's position passed them.
 */
export class Reread {
  /**
   * The furthest end of a re-read the hub's position passed (the furthest the hub had published over the token's
   * range then, its own token's mark or another's), -1 before any: the re-read up to there, which the hub cannot tell
   * from what clients were sent (an older version, a change they have, or one of a part never sent), is not
   * published. Clients start over past it instead, and an id that does not stand at or past it over the token's
   * range (its own mark, or along lineage the other tokens') is from before.
   */
  passed = -1;
  /** The end of the re-read that has not reached it yet (`undefined` when none is open): nothing of it is published up to it. */
  end: number | undefined;
  /**
   * The furthest the hub was handed of the open re-read so far (read, not published), -1 before any: once the
   * re-read will not reach its end on this host, what an id must stand at over its range.
   */
  read = -1;
  /**
   * The ownership (the batch's tracker's signal) the open re-read was last read under here: once it ends (the lease
   * lost, released, handed over, the partition gone and replaced by its children), the re-read will not reach its end
   * on this host.
   */
  owner: AbortSignal | undefined;

  /** Whether a re-read has not reached its end yet. */
  get open(): boolean {
    return this.end !== undefined;
  }

  /** Opens a re-read up to `to` (or moves the open one's end there, if further). */
  openTo(to: number): void {
    this.end = Math.max(to, this.end ?? -1);
  }

  /** Records a batch of the open re-read: how far it was read, and the ownership it was read under. */
  readBatch<T>(batch: ChangeBatch<T>): void {
    this.read = Math.max(batch.readLsn ?? -1, batch.lastLsn ?? -1, this.read);
    const signal = batch.origin?.tracker.signal;
    // A late batch of an ended ownership does not end a newer one's reading.
    if (signal && (!signal.aborted || this.owner === undefined || this.owner.aborted)) this.owner = signal;
  }

  /** The open re-read reached its end. */
  close(): void {
    this.end = undefined;
    this.read = -1;
    this.owner = undefined;
  }

  /** The hub's position passes a re-read up to `to` (not published). */
  pass(to: number): void {
    this.passed = Math.max(to, this.passed);
  }

  /**
   * What an id must stand at over the token's range not to lack a re-read of it the hub did not publish, given where
   * the other tokens' marks stand over the range (`others`, along lineage, asked only while one is open): the end of each one it passed and, for one
   * still open, its end while it may reach it on this host. One that will not (its ownership here ended, or other
   * tokens, its children or parts, published past its end over its whole range) is over: an id must stand at or past
   * what the hub was handed of it (ids given since hold that; the changes past it that the hub publishes are in its
   * buffer, as any others).
   */
  need(others: () => number): number {
    if (this.end === undefined) return this.passed;
    const over = this.owner?.aborted === true || others() >= this.end;
    return Math.max(this.passed, over ? Math.min(this.end, this.read) : this.end);
  }
}
