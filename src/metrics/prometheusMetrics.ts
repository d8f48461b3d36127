import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';
import type { FeedEvent } from '../core/events.js';
import type { ChangeFeedProcessor } from '../feed/createChangeFeed.js';
import { checkEstimateOptions, estimateLag, type EstimateLagOptions, type LeaseLag } from '../estimator/estimateLag.js';
import { InvalidOptionsError } from '../errors/index.js';

/** Options of {@link prometheusMetrics}. */
export interface PrometheusMetricsOptions {
  /** Registry to register the metrics in. Default: prom-client's global `register`. */
  readonly registry?: Registry;
  /** Prefix of every metric name. Default `'rxfeed_'`. */
  readonly prefix?: string;
  /**
   * Export the lag of every lease this host owns (`<prefix>lease_lag_changes{lease}` and
   * `<prefix>lease_lag_seconds{lease}`), estimated like the .NET estimator when Prometheus scrapes: one read of
   * one change per owned lease, at most once per `intervalMs`. Give the processor's own source (or a second
   * instance over the same container), lease store, prefix and lease scheme. Default: no lag metrics.
   */
  readonly lag?: PrometheusLagOptions;
}

/** Where {@link prometheusMetrics} estimates lag from. */
export interface PrometheusLagOptions extends Pick<EstimateLagOptions, 'source' | 'leases' | 'leasePrefix' | 'leaseScheme' | 'concurrency'> {
  /** Reuse an estimate younger than this, in milliseconds, so frequent scrapes cost no extra reads. Default `10000`. */
  readonly intervalMs?: number;
  /** Clock, in ms since the epoch. Default `Date.now`. */
  readonly now?: () => number;
}

/** What {@link prometheusMetrics} registered; `stop()` unregisters the metrics and stops counting. */
export interface PrometheusMetrics {
  /** The registry the metrics are in. */
  readonly registry: Registry;
  /** Unregisters the metrics and stops counting. */
  stop(): void;
}

async function loadPromClient(): Promise<typeof PromClient> {
  try {
    return await import('prom-client');
  } catch (error) {
    throw new Error('rxfeed metrics need the optional package prom-client: run `npm install prom-client`', { cause: error });
  }
}

/**
 * Exposes a processor's health as Prometheus metrics (through the optional `prom-client` package).
 *
 * In short: leases owned, read credit in use, checkpoints, errors and stalls, labelled with the host.
 *
 * Metrics (with the default prefix): `rxfeed_leases_owned` and `rxfeed_in_flight_changes` (gauges);
 * `rxfeed_lease_events_total{event}`, `rxfeed_checkpoints_total`, `rxfeed_checkpointed_changes_total`,
 * `rxfeed_errors_total{error,kind}`, `rxfeed_read_failures_total{failure}` (every retried read failure, by cause)
 * `rxfeed_stalls_total` and `rxfeed_dead_letters_total` (counters). Every metric has an `owner` label.
 * With the `lag` option, `rxfeed_lease_lag_changes{lease}` and `rxfeed_lease_lag_seconds{lease}` (gauges) give
 * the backlog of every lease this host owns, estimated at scrape time (never-checkpointed leases report their
 * real backlog where the source can compute it, else the sentinel 1, as the .NET estimator does).
 *
 * @example
 * ```ts
 * import { createChangeFeed } from 'rxfeed';
 * import { prometheusMetrics } from 'rxfeed/metrics';
 * const feed = createChangeFeed(options);
 * await prometheusMetrics(feed); // then serve `register.metrics()` on /metrics
 * ```
 * @param processor the processor to observe (from `createChangeFeed`).
 * @param options registry and name prefix.
 * @returns the registry used and a `stop()` that unregisters the metrics.
 */
export async function prometheusMetrics(
  processor: ChangeFeedProcessor<unknown>,
  options: PrometheusMetricsOptions = {},
): Promise<PrometheusMetrics> {
  const lagOptions = options.lag;
  if (lagOptions !== undefined) checkLagOptions(lagOptions);
  const prom = await loadPromClient();
  const registry = options.registry ?? prom.register;
  const metric: MetricScope = { prom, common: { registers: [registry] }, prefix: options.prefix ?? 'rxfeed_', owner: processor.owner };
  const owned = new Set<string>();

  registerFeedGauges(metric, processor, owned);
  const counters = registerFeedCounters(metric);
  const lagGauges = lagOptions ? registerLagGauges(metric, () => owned, lagOptions) : [];
  const subscription = processor.events$.subscribe(countEvents(counters, owned, metric.owner));
  const names = [...FEED_METRICS, ...lagGauges];
  return {
    registry,
    stop() {
      subscription.unsubscribe();
      for (const name of names) registry.removeSingleMetric(metric.prefix + name);
    },
  };
}

/** Where and how {@link prometheusMetrics} registers its metrics: prom-client, the registry, the name prefix, the host. */
interface MetricScope {
  readonly prom: typeof PromClient;
  readonly common: { registers: Registry[] };
  readonly prefix: string;
  readonly owner: string;
}

/** The names (without prefix) of the metrics every {@link prometheusMetrics} registers, in registration order. */
const FEED_METRICS = [
  'leases_owned',
  'in_flight_changes',
  'lease_events_total',
  'checkpoints_total',
  'checkpointed_changes_total',
  'errors_total',
  'read_failures_total',
  'stalls_total',
  'dead_letters_total',
] as const;

/** The counters the feed's events drive. */
interface FeedCounters {
  readonly leaseEvents: PromClient.Counter;
  readonly checkpoints: PromClient.Counter;
  readonly checkpointed: PromClient.Counter;
  readonly errors: PromClient.Counter;
  readonly readFailures: PromClient.Counter;
  readonly stalls: PromClient.Counter;
  readonly deadLetters: PromClient.Counter;
}

/** Validates the `lag` option: the estimator's options, and `intervalMs` a non-negative number. */
function checkLagOptions(lagOptions: PrometheusLagOptions): void {
  checkEstimateOptions(lagOptions);
  const interval = lagOptions.intervalMs;
  if (interval !== undefined && (!Number.isFinite(interval) || interval < 0)) {
    throw new InvalidOptionsError('lag.intervalMs', `must be a non-negative number of milliseconds, got ${String(interval)}`);
  }
}

/** Registers the gauges read at scrape time: leases owned (from the events counted) and read credit in use. */
function registerFeedGauges({ prom, common, prefix, owner }: MetricScope, processor: ChangeFeedProcessor<unknown>, owned: ReadonlySet<string>): void {
  new prom.Gauge({
    ...common,
    name: `${prefix}leases_owned`,
    help: 'Leases this host owns',
    labelNames: ['owner'],
    collect() {
      this.set({ owner }, owned.size);
    },
  });
  new prom.Gauge({
    ...common,
    name: `${prefix}in_flight_changes`,
    help: 'Changes read but not yet acknowledged by checkpointEvery (read credit in use)',
    labelNames: ['owner'],
    collect() {
      this.set({ owner }, processor.inFlightChanges);
    },
  });
}

/** Registers the counters of lease events, checkpoints, errors, read failures, stalls and dead letters. */
function registerFeedCounters({ prom, common, prefix }: MetricScope): FeedCounters {
  const counter = (name: string, help: string, labels: string[] = []): PromClient.Counter =>
    new prom.Counter({ ...common, name: `${prefix}${name}`, help, labelNames: ['owner', ...labels] });
  return {
    leaseEvents: counter('lease_events_total', 'Lease ownership events (acquired, released, lost, takenOver, split)', ['event']),
    checkpoints: counter('checkpoints_total', 'Checkpoints written'),
    checkpointed: counter('checkpointed_changes_total', 'Changes covered by written checkpoints'),
    errors: counter('errors_total', 'Errors reported on the events stream, by error name and kind (item, infrastructure, fencing, corrupt)', ['error', 'kind']),
    readFailures: counter(
      'read_failures_total',
      'Failed partition reads that were retried, by cause (throttled, unavailable, timeout, network, other); every one, not only those reported as error events',
      ['failure'],
    ),
    stalls: counter('stalls_total', 'Stall warnings (dropped batches, exhausted credit)'),
    deadLetters: counter('dead_letters_total', 'Changes written to the dead-letter sink (onFailure: { deadLetter })'),
  };
}

/** The handler of the feed's events: counts each in its counter, and keeps the set of owned leases. */
function countEvents(counters: FeedCounters, owned: Set<string>, owner: string): (event: FeedEvent) => void {
  const { leaseEvents, checkpoints, checkpointed, errors, readFailures, stalls, deadLetters } = counters;
  return (event) => {
    switch (event.type) {
      case 'leaseAcquired':
        owned.add(event.lease);
        leaseEvents.inc({ owner, event: 'acquired' });
        break;
      case 'leaseReleased':
      case 'leaseLost':
        owned.delete(event.lease);
        leaseEvents.inc({ owner, event: event.type === 'leaseLost' ? 'lost' : 'released' });
        break;
      case 'leaseTakenOver':
        leaseEvents.inc({ owner, event: 'takenOver' });
        break;
      case 'partitionSplit':
        leaseEvents.inc({ owner, event: 'split' });
        break;
      case 'checkpoint':
        checkpoints.inc({ owner });
        checkpointed.inc({ owner }, event.changes);
        break;
      case 'error':
        errors.inc({ owner, error: event.error.name, kind: event.kind });
        break;
      case 'readRetry':
        readFailures.inc({ owner, failure: event.failure });
        break;
      case 'stall':
        stalls.inc({ owner });
        break;
      case 'deadLettered':
        deadLetters.inc({ owner }, event.lsns.length);
        break;
    }
  };
}

/**
 * Registers the lag gauges: both are filled from one cached estimate, taken when a scrape finds the cache older
 * than `intervalMs`. Returns the metric names (without prefix).
 */
function registerLagGauges({ prom, common, prefix, owner }: MetricScope, owned: () => ReadonlySet<string>, options: PrometheusLagOptions): string[] {
  const intervalMs = options.intervalMs ?? 10_000;
  const now = options.now ?? Date.now;
  let cached: { at: number; lags: Promise<LeaseLag[]> } | undefined;
  const estimate = (): Promise<LeaseLag[]> => {
    if (!cached || now() - cached.at >= intervalMs) {
      const lags = estimateLag({ ...options, now }).catch((error: unknown) => {
        cached = undefined; // the next scrape tries again
        throw error;
      });
      cached = { at: now(), lags };
    }
    return cached.lags;
  };
  const mine = async (): Promise<LeaseLag[]> => {
    const leases = owned();
    return (await estimate()).filter((l) => leases.has(l.leaseToken));
  };
  new prom.Gauge({
    ...common,
    name: `${prefix}lease_lag_changes`,
    help: 'Changes waiting after the checkpoint of each lease this host owns (1 = unknown but maybe behind)',
    labelNames: ['owner', 'lease'],
    async collect() {
      this.reset();
      for (const l of await mine()) this.set({ owner, lease: l.leaseToken }, l.estimatedLag);
    },
  });
  new prom.Gauge({
    ...common,
    name: `${prefix}lease_lag_seconds`,
    help: 'Age of the oldest unprocessed change of each lease this host owns, in seconds',
    labelNames: ['owner', 'lease'],
    async collect() {
      this.reset();
      for (const l of await mine()) if (l.timeLagMs !== undefined) this.set({ owner, lease: l.leaseToken }, l.timeLagMs / 1_000);
    },
  });
  return ['lease_lag_changes', 'lease_lag_seconds'];
}
