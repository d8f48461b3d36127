import { CosmosHttpError } from '../errors.js';
import { newEtag, seconds } from './ids.js';
import type { ContainerState, Doc } from './types.js';

/** Throughput offers (`/offers`): one per container, numbered across the account's lifetime. */
export class Offers {
  #counter = 0;
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  /** A new offer for a container resource, recording its throughput (RU/s). */
  create(container: Doc, containerRid: string, throughput: number): Doc {
    const id = `offer${++this.#counter}`;
    return {
      id,
      _rid: id,
      _self: `offers/${id}/`,
      _etag: newEtag(),
      _ts: seconds(this.#now()),
      offerVersion: 'V2',
      offerType: 'Invalid',
      resource: container['_self'],
      offerResourceId: containerRid,
      content: { offerThroughput: throughput, offerIsRUPerMinuteThroughputEnabled: false },
    };
  }

  /** Replaces the content (the throughput) of the offer with this id among `containers`; nothing else changes. */
  replace(containers: Iterable<ContainerState>, id: string, body: Doc): Doc {
    const c = [...containers].find((x) => x.offer['id'] === id);
    if (!c) throw new CosmosHttpError(404, `offer ${id} does not exist`);
    const content = body['content'];
    if (content === null || typeof content !== 'object') throw new CosmosHttpError(400, 'an offer needs a content object');
    c.offer = { ...c.offer, content, _etag: newEtag(), _ts: seconds(this.#now()) };
    return c.offer;
  }
}
