import createDebug from 'debug';

/** A namespaced logger whose lines are tagged with owner and lease. */
export interface Logger {
  (message: string, ...args: unknown[]): void;
  readonly enabled: boolean;
}

/**
 * A `debug` logger under `rxfeed:<area>` that prefixes every line with `[owner=… lease=…]`, so logs of many
 * hosts can be read side by side. Never pass keys or tokens.
 */
export function logger(area: string, tags: { owner?: string; lease?: string } = {}): Logger {
  const debug = createDebug(`rxfeed:${area}`);
  const parts: string[] = [];
  if (tags.owner !== undefined) parts.push(`owner=${tags.owner}`);
  if (tags.lease !== undefined) parts.push(`lease=${tags.lease}`);
  const prefix = parts.length ? `[${parts.join(' ')}] ` : '';
  const log = ((message: string, ...args: unknown[]) => {
    if (debug.enabled) debug(prefix + message, ...args);
  }) as Logger;
  Object.defineProperty(log, 'enabled', { get: () => debug.enabled });
  return log;
}
