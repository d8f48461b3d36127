import { partitionKeyPaths, type PartitionKeyPaths } from './mapChange.js';

/** What reads need to know of the container, from a container read. @internal */
export interface ContainerInfo {
  /** The container's resource id, which continuation tokens carry. */
  readonly rid: string;
  /** The container's partition key paths, for the changes' keys. */
  readonly keyPaths: PartitionKeyPaths | undefined;
  /** When the container read that gave it was answered (`performance.now()`). */
  readonly at: number;
}

/**
 * A new iterator is given the container's rid from this source's last container read if that is at most this
 * old (ms), instead of reading the container itself first (see `seedIteratorRid`): the iterators a
 * processor starts with, right after its listing (which reads the container alongside), skip a round trip
 * each; one rebuilt later (a lease taken over, a failed read) reads the container again, as the SDK does.
 *
 * @internal
 */
export const RID_FRESH_MS = 1_000;

/** The {@link ContainerInfo} of a container read's resource, answered now. @internal */
export function containerInfoOf(resource: { readonly _rid: string; readonly partitionKey?: { readonly paths?: readonly string[] } | undefined }): ContainerInfo {
  const paths = resource.partitionKey?.paths;
  return { rid: resource._rid, keyPaths: paths ? partitionKeyPaths(paths) : undefined, at: performance.now() };
}
