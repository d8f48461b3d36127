import type { Operation } from '../core/Change.js';
import type { FeedRange } from '../core/Partition.js';

/**
 * A change that user code failed on after every attempt its retry policy allowed, with what is needed to
 * look at it, fix the cause and re-drive it. Written to a {@link DeadLetterSink} before the checkpoint passes it.
 */
export interface DeadLetter<T = unknown> {
  /** Unique per change: `<leaseToken>:<lsn>:<document id>`; writing the same letter twice keeps one. */
  readonly id: string;
  /** The lease token (partition id) the change was read from. */
  readonly leaseToken: string;
  /** The change's LSN in its partition. */
  readonly lsn: number;
  /** The document id. */
  readonly documentId: string;
  /** What happened to the document. */
  readonly operation: Operation;
  /** The document as read (`undefined` for a delete in AllVersionsAndDeletes mode). */
  readonly document: T | undefined;
  /** The document's partition key value, when the source knows it. */
  readonly partitionKey?: unknown;
  /** The last error, as plain data (name, message, stack). */
  readonly error: { readonly name: string; readonly message: string; readonly stack?: string };
  /** Attempts made, the first included. */
  readonly attempts: number;
  /** The lease epoch the change was read under (the fencing token of the writer). */
  readonly epoch: number;
  /** When it was dead-lettered, in ms since the epoch. */
  readonly deadLetteredAtMs: number;
}

/** Who writes a dead letter: the lease it was read under, for fencing. */
export interface DeadLetterWriter {
  /** The lease token of the partition. */
  readonly leaseToken: string;
  /** The key range the lease covers (fencing is per range lineage: a split child fences its parent's range). */
  readonly range: FeedRange | undefined;
  /** The lease epoch of this ownership. */
  readonly epoch: number;
}

/** A plain-data copy of an error, for storage. @internal */
export function errorData(error: unknown): DeadLetter['error'] {
  if (error instanceof Error) return { name: error.name, message: error.message, ...(error.stack ? { stack: error.stack } : {}) };
  return { name: 'Error', message: typeof error === 'string' ? error : JSON.stringify(error) ?? String(error) };
}

/** The id of the dead letter of one change. @internal */
export function deadLetterId(leaseToken: string, lsn: number, documentId: string): string {
  return `${leaseToken}:${lsn}:${documentId}`;
}
