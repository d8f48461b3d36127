import type { Container } from '@azure/cosmos';
import { InvalidOptionsError } from '../errors/index.js';
import type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';
import { compareLetters, type DeadLetterQuery, type DeadLetterStore, queryLimit } from './DeadLetterSink.js';
import { type FenceEntry, raiseFence } from './fence.js';

const FENCE_ID = '.fences';
const KIND = 'rxfeedDeadLetter';
const MAX_FENCE_ATTEMPTS = 10;

interface FenceDocument {
  id: string;
  ranges: FenceEntry[];
  _etag?: string;
}

/**
 * Dead letters as documents in an Azure Cosmos DB container partitioned on `/id` (one letter per document,
 * id derived from lease token, LSN and document id), fenced by lease epoch per key range through one
 * `.fences` document updated with optimistic concurrency.
 *
 * @example
 * ```ts
 * import { CosmosDeadLetterStore } from 'rxfeed';
 * const deadLetter = new CosmosDeadLetterStore(client.database('shop').container('orders-poison'));
 * ```
 */
export class CosmosDeadLetterStore<T = unknown> implements DeadLetterStore<T> {
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

  async write(letters: readonly DeadLetter<T>[], writer: DeadLetterWriter): Promise<void> {
    await this.#raiseFence(writer);
    await Promise.all(
      letters.map(async (letter) => {
        try {
          await this.#container.items.create({ ...letter, id: documentId(letter.id), letterId: letter.id, kind: KIND });
        } catch (error) {
          if (statusOf(error) !== 409) throw error; // 409: written before (a retry after a lost reply)
        }
      }),
    );
  }

  async list(query?: DeadLetterQuery): Promise<DeadLetter<T>[]> {
    const limit = queryLimit(query);
    const { resources } = await this.#container.items
      .query<DeadLetter<T> & { letterId: string }>({
        query: 'SELECT * FROM c WHERE c.kind = @kind',
        parameters: [{ name: '@kind', value: KIND }],
      })
      .fetchAll();
    return resources
      .map((d) => toLetter<T>(d))
      .filter((l) => query?.leaseToken === undefined || l.leaseToken === query.leaseToken)
      .sort(compareLetters)
      .slice(0, limit);
  }

  async remove(ids: readonly string[]): Promise<void> {
    await Promise.all(
      ids.map(async (id) => {
        const docId = documentId(id);
        try {
          await this.#container.item(docId, docId).delete();
        } catch (error) {
          if (statusOf(error) !== 404) throw error;
        }
      }),
    );
  }

  async #raiseFence(writer: DeadLetterWriter): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.#readFence();
      const ranges = raiseFence(current?.ranges ?? [], writer);
      try {
        if (current) {
          await this.#container.item(FENCE_ID, FENCE_ID).replace({ id: FENCE_ID, ranges }, { accessCondition: { type: 'IfMatch', condition: current._etag! } });
        } else {
          await this.#container.items.create({ id: FENCE_ID, ranges });
        }
        return;
      } catch (error) {
        const status = statusOf(error);
        if ((status !== 412 && status !== 409) || attempt >= MAX_FENCE_ATTEMPTS) throw error;
      }
    }
  }

  async #readFence(): Promise<FenceDocument | undefined> {
    try {
      const { resource } = await this.#container.item(FENCE_ID, FENCE_ID).read<FenceDocument>();
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
  for (const key of Object.keys(letter)) if (key.startsWith('_') || key === 'kind') delete letter[key];
  return letter as unknown as DeadLetter<T>;
}

function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown; statusCode?: unknown }).code ?? (error as { statusCode?: unknown }).statusCode;
  return typeof code === 'number' ? code : undefined;
}
