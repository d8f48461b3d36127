import type { Source } from '../../../src/sources/Source.js';

/** Every method of a {@link Source}, each required. */
type SourceMethods<T> = {
  [K in keyof Source<T> as NonNullable<Source<T>[K]> extends (...args: never[]) => unknown ? K : never]-?: NonNullable<Source<T>[K]>;
};

/**
 * What a wrapper changes: each given method gets the inner source's method (bound) and returns the one the wrapper
 * has in its place. An override of an optional method is used only when the inner source has that method.
 */
export type SourceOverrides<T> = { readonly [K in keyof SourceMethods<T>]?: (inner: SourceMethods<T>[K]) => SourceMethods<T>[K] };

const METHODS = ['listPartitions', 'read', 'checkStart', 'positionAt', 'currentTime', 'checkReachable'] as const;
const PROPERTIES = ['description', 'destination', 'mode', 'concurrentReads'] as const;

// Every member of Source is forwarded: one added to the interface fails to compile here until it is listed above
// (a wrapper that forgot `currentTime` once pinned 'now' starts at lease creation and lost changes).
type Unlisted = Exclude<keyof Source, (typeof METHODS)[number] | (typeof PROPERTIES)[number]>;
const everyMemberListed: [Unlisted] extends [never] ? true : { unlisted: Unlisted } = true;
void everyMemberListed;

/**
 * A source that forwards every member of `source` (its optional ones only when it has them; properties read
 * live), with `overrides` in place of the methods a wrapper changes.
 *
 * @example
 * ```ts
 * const slow = forwardSource(memory, { read: (read) => async (request) => { await delay(100); return read(request); } });
 * ```
 */
export function forwardSource<T>(source: Source<T>, overrides: SourceOverrides<T> = {}): Source<T> {
  const wrapper: Record<string, unknown> = {};
  for (const key of PROPERTIES) {
    if (key in source) Object.defineProperty(wrapper, key, { get: () => source[key], enumerable: true });
  }
  for (const key of METHODS) {
    const method = source[key] as ((...args: never[]) => unknown) | undefined;
    if (typeof method !== 'function') continue;
    const inner = method.bind(source);
    const override = overrides[key] as ((inner: (...args: never[]) => unknown) => unknown) | undefined;
    wrapper[key] = override ? override(inner) : inner;
  }
  return wrapper as unknown as Source<T>;
}
