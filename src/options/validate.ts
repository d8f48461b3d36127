import { InvalidOptionsError } from '../errors/InvalidOptionsError.js';

// The validation rules every options object of rxfeed uses (the feed, the coordinator, the admin tools): each
// rule is written once here and throws an InvalidOptionsError naming the option (as the caller spells it) and
// the fix. An `undefined` value always passes: the caller's default applies.

/** @internal An integer ≥ `min`. */
export function integerAtLeast(name: string, value: unknown, min = 1): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new InvalidOptionsError(name, `expected an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  }
}

/** @internal A finite number of milliseconds ≥ `min`. */
export function durationMs(name: string, value: unknown, min = 0): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    throw new InvalidOptionsError(
      name,
      `expected a finite number of milliseconds ≥ ${min}, got ${JSON.stringify(value)} (the unit is ms)`,
    );
  }
}

/** @internal A finite number of milliseconds > 0 (a fraction of a millisecond included). */
export function positiveMs(name: string, value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidOptionsError(name, `must be a positive number of milliseconds, got ${String(value)}`);
  }
}

/** @internal True for an object with every one of `methods` as a function. */
export function hasMethods(value: unknown, methods: readonly string[]): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function')
  );
}

/** @internal One of `allowed` (strings). */
export function oneOf(name: string, value: unknown, allowed: readonly string[]): void {
  if (value === undefined) return;
  if (!allowed.includes(value as string)) {
    throw new InvalidOptionsError(name, `must be ${allowed.map((a) => `'${a}'`).join(' or ')}, got ${String(value)}`);
  }
}

/** @internal An RxJS `SchedulerLike`. */
export function schedulerLike(name: string, value: unknown): void {
  if (value !== undefined && !hasMethods(value, ['schedule', 'now'])) {
    throw new InvalidOptionsError(name, 'expected an RxJS SchedulerLike (e.g. asyncScheduler)');
  }
}

/** @internal Keeps the entries whose value is not `undefined` (so spreading them never overrides a default). */
export function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
