import { RxfeedError } from '../../errors/index.js';
import type { Entry } from './log.js';

/** A document as last written, and the log entry that wrote it. */
export interface StoredDocument<T> {
  readonly document: T;
  readonly entry: Entry<T>;
}

/** The id of a document written to a {@link MemorySource}; throws unless it is a non-empty string. */
export function documentId(document: unknown): string {
  const id = (document as { id?: unknown } | null)?.id;
  if (typeof id !== 'string' || id === '') throw new RxfeedError('a MemorySource document needs a non-empty string id');
  return id;
}

/** The current documents of a {@link MemorySource}, by partition key and id (a deleted one is not there). */
export class DocumentStore<T> {
  readonly #documents = new Map<string, StoredDocument<T>>();

  /** The current version of a document, if it exists. */
  get(id: string, partitionKey: unknown): StoredDocument<T> | undefined {
    return this.#documents.get(docKey(id, partitionKey));
  }

  /** Whether a document exists. */
  has(id: string, partitionKey: unknown): boolean {
    return this.#documents.has(docKey(id, partitionKey));
  }

  /**
   * Takes the entry of a write as the document's current version (a delete removes the document) and marks the
   * version it replaces as superseded, which `'latestVersion'` reads then skip.
   */
  record(id: string, partitionKey: unknown, entry: Entry<T>, existing: StoredDocument<T> | undefined): void {
    if (existing) existing.entry.superseded = true;
    const key = docKey(id, partitionKey);
    if (entry.deleted) this.#documents.delete(key);
    else this.#documents.set(key, { document: entry.change.document as T, entry });
  }
}

function docKey(id: string, partitionKey: unknown): string {
  return `${JSON.stringify(partitionKey)}\u0000${id}`;
}
