/** What a request does, as fault rules and the request log name it. */
export type RequestKind =
  | 'account'
  | 'database'
  | 'container'
  | 'pkranges'
  | 'offer'
  | 'changeFeed'
  | 'query'
  | 'queryPlan'
  | 'readFeed'
  | 'read'
  | 'create'
  | 'upsert'
  | 'replace'
  | 'patch'
  | 'delete'
  | 'batch'
  | 'admin'
  | 'unknown';

/** A request as seen by fault matching and the request log. */
export interface RequestInfo {
  /** HTTP method, upper case. */
  method: string;
  /** Decoded path, e.g. `/dbs/db/colls/c/docs`. */
  path: string;
  /** What the request does. */
  kind: RequestKind;
  /** The database it is about, when it is about one. */
  databaseId?: string;
  /** The container it is about, when it is about one. */
  containerId?: string;
  /** `x-ms-documentdb-partitionkeyrangeid`, when sent. */
  rangeId?: string;
}

/** Which requests a fault applies to; every field given must match. */
export interface FaultMatch {
  /** HTTP method (any case). */
  method?: string;
  /** What the request does, or any of several. */
  kind?: RequestKind | RequestKind[];
  /** A substring of, or a pattern for, the decoded path. */
  path?: string | RegExp;
  /** The database's id. */
  databaseId?: string;
  /** The container's id. */
  containerId?: string;
  /** The partition key range the request names (`x-ms-documentdb-partitionkeyrangeid`). */
  rangeId?: string;
}

/**
 * What a matched request gets instead of (or before) its normal answer:
 * - `{ status, substatus?, retryAfterMs?, message? }`: an error response (429, 503, 500, 408, 410…);
 * - `{ delayMs }`: the normal answer, this much later;
 * - `{ hang: true }`: no answer at all, so the client times out;
 * - `{ reset: true }`: the socket is destroyed;
 * - `{ lostReply: true }`: the request is served (a write lands), then the socket is destroyed before the
 *   answer: the client sees a network error for a request that took effect;
 * - `{ operations }`: a batch or bulk request is served, but each operation `operations(index)` names fails
 *   with that status (a 429 with its retry-after, a 503, a 408…) and does not land; in a bulk request the
 *   others land (a bulk that lands partly), in a transactional batch none does (207, the others 424).
 *   Other requests are served normally.
 */
export type FaultAction =
  | { status: number; substatus?: number; retryAfterMs?: number; message?: string }
  | { delayMs: number }
  | { hang: true }
  | { reset: true }
  | { lostReply: true }
  | {
      /** How the operation at `index` of a batch or bulk request fails; `undefined`: it is served. */
      operations: (index: number) => OperationFault | undefined;
    };

/** How one operation of a batch or bulk request fails (see {@link FaultAction}). */
export interface OperationFault {
  /** The operation's status code (429, 408, 503, …). */
  readonly status: number;
  /** Its substatus (e.g. 3200 for throttling). */
  readonly substatus?: number;
  /** Sent as the operation's `retryAfterMilliseconds` (throttling). */
  readonly retryAfterMs?: number;
}

/** A fault to inject. */
export interface FaultRule {
  /** Which requests it applies to. Default: every request. */
  match?: FaultMatch;
  /**
   * What a matching request gets; or a function deciding per request (`undefined`: no fault, the next
   * rule is tried, and no hit is counted), for faults driven by a test's own plan. A function is only
   * accepted in this process, not over the `/_emulator/faults` admin request.
   */
  action: FaultAction | ((request: RequestInfo) => FaultAction | undefined);
  /** How many matching requests it hits before it retires itself. Default: unlimited. */
  times?: number;
  /** Chance (0–1) that a matching request is hit, drawn from the emulator's seeded random source. Default 1. */
  probability?: number;
}

/** A registered fault; `remove()` retires it early. */
export interface FaultHandle {
  /** Its id, for the admin request that removes it. */
  readonly id: number;
  /** Requests this fault has hit so far. */
  readonly hits: number;
  /** Retires the fault. */
  remove(): void;
}

function rule(action: FaultAction, match: FaultMatch | undefined, times: number | undefined): FaultRule {
  return { action, ...(match ? { match } : {}), ...(times !== undefined ? { times } : {}) };
}

/**
 * Shorthand rules for the faults tests reach for most.
 *
 * @example
 * ```ts
 * emulator.injectFault(faults.throttle(50, { kind: 'changeFeed' }, 3)); // three 429s, 50 ms retry-after
 * ```
 */
export const faults = {
  /** 429 with `x-ms-retry-after-ms` (default 10 ms) and substatus 3200. */
  throttle: (retryAfterMs = 10, match?: FaultMatch, times?: number): FaultRule =>
    rule({ status: 429, substatus: 3200, retryAfterMs }, match, times),
  /** 503 Service Unavailable. */
  unavailable: (match?: FaultMatch, times?: number): FaultRule => rule({ status: 503 }, match, times),
  /** 410 with a substatus (default 1002, partition key range gone). */
  gone: (substatus = 1002, match?: FaultMatch, times?: number): FaultRule => rule({ status: 410, substatus }, match, times),
  /** Answers normally, `delayMs` later. */
  latency: (delayMs: number, match?: FaultMatch, times?: number): FaultRule => rule({ delayMs }, match, times),
  /** Never answers, so the client's request timeout fires. */
  hang: (match?: FaultMatch, times?: number): FaultRule => rule({ hang: true }, match, times),
  /** Destroys the socket without an answer. */
  reset: (match?: FaultMatch, times?: number): FaultRule => rule({ reset: true }, match, times),
  /** Serves the request (a write lands), then destroys the socket before the answer. */
  lostReply: (match?: FaultMatch, times?: number): FaultRule => rule({ lostReply: true }, match, times),
};

interface ActiveFault {
  id: number;
  rule: FaultRule;
  hits: number;
}

function matches(m: FaultMatch | undefined, r: RequestInfo): boolean {
  if (!m) return true;
  if (m.method !== undefined && m.method.toUpperCase() !== r.method) return false;
  if (m.kind !== undefined && !(Array.isArray(m.kind) ? m.kind : [m.kind]).includes(r.kind)) return false;
  if (m.path !== undefined && !(typeof m.path === 'string' ? r.path.includes(m.path) : m.path.test(r.path))) return false;
  if (m.databaseId !== undefined && m.databaseId !== r.databaseId) return false;
  if (m.containerId !== undefined && m.containerId !== r.containerId) return false;
  if (m.rangeId !== undefined && m.rangeId !== r.rangeId) return false;
  return true;
}

// Seeded, so "10% of requests fail" is reproducible.
export { seededRandom } from '../internal/random.js';

/** The registered faults, checked in order; the first that hits a request decides its fate. */
export class FaultSet {
  private active: ActiveFault[] = [];
  private nextId = 1;

  constructor(private readonly random: () => number) {}

  add(rule: FaultRule): FaultHandle {
    validateRule(rule);
    const f: ActiveFault = { id: this.nextId++, rule, hits: 0 };
    this.active.push(f);
    const remove = (): void => {
      this.active = this.active.filter((x) => x !== f);
    };
    return {
      id: f.id,
      get hits() {
        return f.hits;
      },
      remove,
    };
  }

  clear(): void {
    this.active = [];
  }

  /** The action for this request, if a fault hits it; counts the hit and retires exhausted rules. */
  pick(r: RequestInfo): FaultAction | undefined {
    for (const f of this.active) {
      if (!matches(f.rule.match, r)) continue;
      if (f.rule.probability !== undefined && this.random() >= f.rule.probability) continue;
      const decide = f.rule.action;
      const action = typeof decide === 'function' ? decide(r) : decide;
      if (action === undefined) continue;
      if (typeof decide === 'function') validateAction(action);
      f.hits++;
      if (f.rule.times !== undefined && f.hits >= f.rule.times) this.active = this.active.filter((x) => x !== f);
      return action;
    }
    return undefined;
  }
}

function validateRule(rule: FaultRule): void {
  if (typeof rule.action === 'function') return validateCounts(rule);
  validateAction(rule.action);
  validateCounts(rule);
}

function validateAction(action: FaultAction | undefined): void {
  const a = action as Partial<Record<string, unknown>> | undefined;
  if (!a || typeof a !== 'object' || !('status' in a || 'delayMs' in a || 'hang' in a || 'reset' in a || 'lostReply' in a || 'operations' in a)) {
    throw new TypeError('fault action needs one of: status, delayMs, hang, reset, lostReply, operations');
  }
  if ('operations' in a && typeof a['operations'] !== 'function') throw new TypeError('fault operations must be a function from an operation index to its failure');
  if ('status' in a && (typeof a['status'] !== 'number' || a['status'] < 400 || a['status'] > 599)) {
    throw new TypeError('fault status must be an HTTP error status (400–599)');
  }
  if ('delayMs' in a && (typeof a['delayMs'] !== 'number' || a['delayMs'] < 0)) throw new TypeError('fault delayMs must be ≥ 0');
}

function validateCounts(rule: FaultRule): void {
  if (rule.times !== undefined && (!Number.isInteger(rule.times) || rule.times < 1)) throw new TypeError('fault times must be a positive integer');
  if (rule.probability !== undefined && !(rule.probability > 0 && rule.probability <= 1)) {
    throw new TypeError('fault probability must be in (0, 1]');
  }
}
