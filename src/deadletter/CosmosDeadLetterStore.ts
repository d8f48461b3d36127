import type { Container, ItemDefinition } from '@azure/cosmos';
import type { FeedRange } from '../core/Partition.js';
import { rangesOverlap } from '../core/Partition.js';
import { DeadLetterFencedError } from '../errors/DeadLetterFencedError.js';
import { InvalidOptionsError } from '../errors/index.js';
import type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';
import { type DeadLetterQuery, type DeadLetterStore, queryLimit, selectLetters } from './DeadLetterSink.js';
import { type FenceEntry, raiseFence, writerRange } from './fence.js';

const FENCE_ID = '.fences';
const KIND = 'rxfeedDeadLetter';
const MAX_FENCE_ATTEMPTS = 10;

interface FenceDocument {
  id: string;
  ranges: FenceEntry[];
  _etag?: string;
}

/**
 * A letter as stored: under the id of its change, with its own id, the range of the writer that stored it
 * and the epoch of the last writer that stored or took it over.
 */
type LetterDocument<T> = DeadLetter<T> & { letterId: string; kind: string; rangeMin: string; rangeMax: string; writerEpoch: number; _etag?: string };

/** Fields of a letter document that are not the letter's. */
const STORAGE_FIELDS = new Set(['kind', 'letterId', 'rangeMin', 'rangeMax', 'writerEpoch']);

/** A letter document this write created (or took over), with the version it wrote. */
interface Stored {
  readonly id: string;
  readonly etag: string | undefined;
}

/**
 * Dead letters as documents in an Azure Cosmos DB container partitioned on `/id`, fenced by lease epoch per
 * key range through one `.fences` document updated with optimistic concurrency.
 *
 * A letter is stored under the id of its change (LSN and document id), so that a split child's letter of a
 * change its parent dead-lettered already is not stored twice (the first stays; same LSN and document over
 * overlapping ranges is the same change). Cosmos DB has no transaction across documents of different
 * partition keys, so the fence and the letters cannot be one request: a write checks the fence, creates
 * its letters, then raises the fence with the version it checked; if a writer with a higher epoch over an
 * overlapping range raised it in between, the write takes back the letters it created and is refused. Only
 * a process that stops for good between the two steps leaves letters behind (letters of changes that did
 * fail; the new owner of the range runs them again).
 *
 * @example
 * ```ts
 * import { CosmosDeadLetterStore } from 'rxfeed';
 * const deadLetter = new CosmosDeadLetterStore(client.database('shop').container('orders-poison'));
 * ```
 */
export class CosmosDeadLetterStore<T = unknown> implements DeadLetterStore<T> {
  /** {@inheritDoc DeadLetterSink.description} */
  readonly description: string;
  readonly #container: Container;

  /** @param container - a container partitioned on `/id`. */
  constructor(container: Container) {
    if (!container || typeof container.items?.create !== 'function') {
      throw new InvalidOptionsError('container', 'expected an @azure/cosmos Container partitioned on /id');
    }
    this.#container = container;
    this.description = `cosmos dead letters dbs/${container.database.id}/colls/${container.id}`;
  }

  /** {@inheritDoc DeadLetterSink.write} */
  async write(letters: readonly DeadLetter<T>[], writer: DeadLetterWriter): Promise<void> {
    let fence = await this.#read<FenceDocument>(FENCE_ID);
    raiseFence(fence?.ranges ?? [], writer); // refused before anything is written
    const range = writerRange(writer);
    const created = (await Promise.all(letters.map((letter) => this.#store(letter, writer, range)))).filter((s) => s !== undefined);
    for (let attempt = 1; ; attempt++) {
      let ranges: FenceEntry[];
      try {
        ranges = raiseFence(fence?.ranges ?? [], writer);
      } catch (error) {
        if (error instanceof DeadLetterFencedError) await this.#takeBack(created);
        throw error;
      }
      try {
        if (fence) {
          await this.#container.item(FENCE_ID, FENCE_ID).replace({ id: FENCE_ID, ranges }, { accessCondition: { type: 'IfMatch', condition: fence._etag! } });
        } else {
          await this.#container.items.create({ id: FENCE_ID, ranges });
        }
        return;
      } catch (error) {
        const status = statusOf(error);
        if ((status !== 412 && status !== 409) || attempt >= MAX_FENCE_ATTEMPTS) throw error;
      }
      fence = await this.#read<FenceDocument>(FENCE_ID);
    }
  }

  /**
   * Creates the document of a letter under its change's id. When one is there already: a letter of another
   * change (ranges that do not overlap) moves this one to its own id; one stored under an epoch at least the
   * writer's is kept (a retry after a lost reply, or the newer writer's); one of a lower epoch is taken over
   * (kept as it is, under the writer's epoch), so that its writer, if refused by the fence, cannot take it
   * back. Returns what this call wrote.
   */
  async #store(letter: DeadLetter<T>, writer: DeadLetterWriter, range: FeedRange): Promise<Stored | undefined> {
    let id = documentId(`${letter.lsn}:${letter.documentId}`);
    for (;;) {
      const doc: LetterDocument<T> = {
        ...letter,
        id,
        letterId: letter.id,
        kind: KIND,
        rangeMin: range.minInclusive,
        rangeMax: range.maxExclusive,
        writerEpoch: writer.epoch,
      };
      try {
        const { resource, etag } = await this.#container.items.create(doc);
        return { id, etag: resource?._etag ?? etag };
      } catch (error) {
        if (statusOf(error) !== 409) throw error;
      }
      const existing = await this.#read<LetterDocument<T>>(id);
      if (existing === undefined) continue; // taken back in between: create it again
      const theirs = existing.rangeMin === undefined ? undefined : { minInclusive: existing.rangeMin, maxExclusive: existing.rangeMax };
      if (theirs && !rangesOverlap(theirs, range)) {
        id = documentId(letter.id); // another change with the same LSN and document id, in another partition
        continue;
      }
      if ((existing.writerEpoch ?? existing.epoch) >= writer.epoch) return undefined;
      // The first letter stays as it is; only the epoch that may take it back changes.
      const claimed = Object.fromEntries(Object.entries({ ...existing, writerEpoch: writer.epoch }).filter(([key]) => !key.startsWith('_')));
      try {
        const { resource, etag } = await this.#container.item(id, id).replace(claimed, { accessCondition: { type: 'IfMatch', condition: existing._etag! } });
        return { id, etag: resource?._etag ?? etag };
      } catch (error) {
        const status = statusOf(error);
        if (status !== 412 && status !== 404) throw error;
      }
    }
  }

  /** Deletes the letters a refused write created, unless another writer has taken them over since. */
  async #takeBack(created: readonly Stored[]): Promise<void> {
    await Promise.all(
      created.map(async ({ id, etag }) => {
        try {
          await this.#container.item(id, id).delete(etag ? { accessCondition: { type: 'IfMatch', condition: etag } } : undefined);
        } catch (error) {
          const status = statusOf(error);
          if (status !== 404 && status !== 412) throw error;
        }
      }),
    );
  }

  /** {@inheritDoc DeadLetterStore.list} */
  async list(query?: DeadLetterQuery): Promise<DeadLetter<T>[]> {
    const limit = queryLimit(query);
    const resources = await this.#letterDocuments();
    return selectLetters(resources.map((d) => toLetter<T>(d)), query?.leaseToken, limit);
  }

  /** {@inheritDoc DeadLetterStore.remove} */
  async remove(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    // A letter's document is found by its letter id (its document id is its change's, or its own).
    const wanted = new Set(ids);
    const docs = (await this.#letterDocuments()).filter((d) => wanted.has(d.letterId));
    await Promise.all(
      docs.map(async ({ id }) => {
        try {
          await this.#container.item(id, id).delete();
        } catch (error) {
          if (statusOf(error) !== 404) throw error;
        }
      }),
    );
  }

  async #letterDocuments(): Promise<LetterDocument<T>[]> {
    const { resources } = await this.#container.items
      .query<LetterDocument<T>>({ query: 'SELECT * FROM c WHERE c.kind = @kind', parameters: [{ name: '@kind', value: KIND }] })
      .fetchAll();
    return resources;
  }

  /** The document with this id (the container is partitioned on `/id`), or `undefined` when there is none. */
  async #read<D extends ItemDefinition>(id: string): Promise<D | undefined> {
    try {
      const { resource } = await this.#container.item(id, id).read<D>();
      return resource ?? undefined;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }
}

/** A Cosmos DB id for a letter id: characters the service refuses in ids (`/ \ ? #`) are escaped. */
function documentId(letterId: string): string {
  return letterId.replace(/[/\\?#%]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

function toLetter<T>(doc: DeadLetter<T> & { letterId: string }): DeadLetter<T> {
  const { letterId, ...rest } = doc as unknown as Record<string, unknown> & { letterId: string };
  const letter: Record<string, unknown> = { ...rest, id: letterId };
  for (const key of Object.keys(letter)) if (key.startsWith('_') || STORAGE_FIELDS.has(key)) delete letter[key];
  return letter as unknown as DeadLetter<T>;
}

function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown; statusCode?: unknown }).code ?? (error as { statusCode?: unknown }).statusCode;
  return typeof code === 'number' ? code : undefined;
}
