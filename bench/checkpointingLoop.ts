/**
 * The fair ceiling's loop for one feed range, shared by bench/cosmos.ts and bench/cosmosWindows.ts: what a
 * minimal hand-written change feed processor does.
 */
import { ChangeFeedStartFrom, StatusCodes, type Container, type FeedRange } from '@azure/cosmos';
import type { Change } from '../src/core/Change.js';

/**
 * Reads one feed range from the beginning to its end with `getChangeFeedIterator` (pages of `page`), summing
 * the documents' `total`, and keeps its continuation in the lease document `id` of `leases` (created first):
 * replaced conditionally (ETag) once `every` changes were read since the last write and awaited before the
 * next read, plus a last write at the end. Calls `onWrite` after each replace.
 *
 * @example
 * ```ts
 * const count = await checkpointingLoop(container, leases, range, 'loops.0', { page: 1_000, every: 1_000 });
 * ```
 * @returns the changes read.
 */
export async function checkpointingLoop(
  container: Container,
  leases: Container,
  range: FeedRange,
  id: string,
  options: { readonly page: number; readonly every: number; readonly onWrite?: () => void },
): Promise<number> {
  let etag = (await leases.items.create({ id, continuation: null })).etag;
  const checkpoint = async (continuation: string | undefined): Promise<void> => {
    ({ etag } = await leases.item(id, id).replace({ id, continuation: continuation ?? null }, { accessCondition: { type: 'IfMatch', condition: etag } }));
    options.onWrite?.();
  };
  const iterator = container.items.getChangeFeedIterator<{ total: number }>({ maxItemCount: options.page, changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) });
  let count = 0;
  let since = 0;
  let sum = 0;
  let continuation: string | undefined;
  for (;;) {
    const page = await iterator.readNext();
    if (page.statusCode === StatusCodes.NotModified) break;
    for (const doc of page.result) sum += doc.total;
    count += page.result.length;
    since += page.result.length;
    continuation = page.continuationToken;
    if (since >= options.every) {
      await checkpoint(continuation);
      since = 0;
    }
  }
  if (since > 0) await checkpoint(continuation);
  if (sum < 0) throw new Error('unreachable');
  return count;
}

/** The pipeline benches' mapping: a change of the document's `total` alone. */
export const toTotal = (c: Change<{ total: number }>): Change<number> => ({ id: c.id, operation: c.operation, lsn: c.lsn, timestampMs: c.timestampMs, document: c.document?.total });
