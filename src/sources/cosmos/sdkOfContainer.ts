import * as ownSdk from '@azure/cosmos';
import type { Container } from '@azure/cosmos';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { logger } from '../../internal/log.js';

/** The parts of `@azure/cosmos` that must come from the same copy of the SDK as the container. */
export type CosmosSdk = Pick<typeof ownSdk, 'ChangeFeedStartFrom' | 'Container'>;

const log = logger('cosmos');
const found = new WeakMap<object, Promise<CosmosSdk>>();

/**
 * The `@azure/cosmos` module instance that created `container`.
 *
 * The SDK checks change feed start locations with `instanceof` against its own `ChangeFeedStartFrom*`
 * classes, so a start location built by another copy of the SDK is refused with "Invalid change feed start
 * location". Two copies are common: a CommonJS app hands rxfeed (ESM) a container from the SDK's CommonJS
 * build, a linked install or a monorepo puts a second `@azure/cosmos` next to rxfeed. This finds the file
 * the container's own `Items.getChangeFeedIterator` runs from (an options getter the SDK reads synchronously
 * while validating, before any request) and loads that copy's entry point, which Node answers from its
 * module cache: the very module instance the application uses. Falls back to rxfeed's own copy when the
 * copy cannot be located (for example when the application is bundled).
 *
 * @internal
 */
export function sdkOfContainer(container: Container): Promise<CosmosSdk> {
  if (container instanceof ownSdk.Container) return Promise.resolve(ownSdk);
  const key = Object.getPrototypeOf(container) as object;
  let sdk = found.get(key);
  if (!sdk) {
    sdk = locate(container).catch((err: unknown) => {
      log('could not load the @azure/cosmos copy that created the container; using rxfeed\'s own: %s', err instanceof Error ? err.message : err);
      return ownSdk;
    });
    found.set(key, sdk);
  }
  return sdk;
}

async function locate(container: Container): Promise<CosmosSdk> {
  const file = sdkFileOf(container);
  const entry = file && entryPointOf(file);
  if (!entry) throw new Error(`no @azure/cosmos entry point found next to ${file ?? 'the container\'s code'}`);
  const sdk = (
    entry.format === 'commonjs' ? createRequire(entry.path)(entry.path) : await import(pathToFileURL(entry.path).href)
  ) as Partial<CosmosSdk>;
  if (!sdk.ChangeFeedStartFrom || !sdk.Container || !(container instanceof sdk.Container)) {
    throw new Error(`${entry.path} is not the copy of @azure/cosmos that created the container`);
  }
  log('container comes from another copy of @azure/cosmos (%s build at %s)', entry.format, entry.path);
  return sdk as CosmosSdk;
}

/** The file of the SDK function that reads the iterator options of `container` (no request is sent). */
function sdkFileOf(container: Container): string | undefined {
  let file: string | undefined;
  const probe = {
    get maxItemCount(): number {
      file ??= callerFile();
      return 1;
    },
  };
  container.items.getChangeFeedIterator(probe);
  return file;
}

/** The file name of the caller of the function that calls this, from raw (not source-mapped) call sites. */
function callerFile(): string | undefined {
  const prepare = Error.prepareStackTrace;
  const limit = Error.stackTraceLimit;
  Error.prepareStackTrace = (_err, sites) => sites;
  Error.stackTraceLimit = 4;
  try {
    const holder: { stack?: NodeJS.CallSite[] } = {};
    Error.captureStackTrace(holder, callerFile);
    // [0] is the probe's getter, [1] the SDK function reading it.
    const name = holder.stack?.[1]?.getFileName() ?? undefined;
    return name?.startsWith('file:') ? fileURLToPath(name) : name;
  } finally {
    Error.prepareStackTrace = prepare;
    Error.stackTraceLimit = limit;
  }
}

/** `<package>/dist/<format>/index.js` for a file inside a build of `@azure/cosmos`. */
function entryPointOf(file: string): { path: string; format: 'esm' | 'commonjs' } | undefined {
  const match = /^(.*[\\/]dist[\\/])(esm|commonjs)[\\/]/.exec(file);
  if (!match) return undefined;
  const format = match[2] as 'esm' | 'commonjs';
  return { path: `${match[1]}${format}${file.includes('\\') ? '\\' : '/'}index.js`, format };
}
