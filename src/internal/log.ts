import createDebug, { type Debugger } from 'debug';

/** A namespaced logger whose lines are tagged with owner and lease. */
export type Logger = (message: string, ...args: unknown[]) => void;

/**
 * One `debug` instance per area, shared by every logger of it: a host holds a logger per lease, and a
 * `debug` instance is a function with a dozen properties of its own (and works out whether its namespace is
 * enabled when created).
 */
const areas = new Map<string, Debugger>();

/**
 * A `debug` logger under `rxfeed:<area>` that prefixes every line with `[owner=… lease=…]`, so logs of many
 * hosts can be read side by side. Never pass keys or tokens.
 */
export function logger(area: string, tags: { owner?: string; lease?: string } = {}): Logger {
  const debug = areas.get(area) ?? createArea(area);
  const parts: string[] = [];
  if (tags.owner !== undefined) parts.push(`owner=${tags.owner}`);
  if (tags.lease !== undefined) parts.push(`lease=${tags.lease}`);
  const prefix = parts.length ? `[${parts.join(' ')}] ` : '';
  return (message, ...args) => {
    // `enabled` follows `debug.enable()` calls made after the logger was created.
    if (debug.enabled) debug(prefix + message, ...args);
  };
}

function createArea(area: string): Debugger {
  const debug = createDebug(`rxfeed:${area}`);
  areas.set(area, debug);
  return debug;
}
