import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';
import type { FeedEvent } from '../core/events.js';
import type { ChangeFeedProcessor } from '../feed/createChangeFeed.js';

/** Options of {@link prometheusMetrics}. */
export interface PrometheusMetricsOptions {
  /** Registry to register the metrics in. Default: prom-client's global `register`. */
  readonly registry?: Registry;
  /** Prefix of every metric name. Default `'rxfeed_'`. */
  readonly prefix?: string;
}

/** What {@link prometheusMetrics} registered; `stop()` unregisters the metrics and stops counting. */
export interface PrometheusMetrics {
  readonly registry: Registry;
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
 * `rxfeed_errors_total{error}` and `rxfeed_stalls_total` (counters). Every metric has an `owner` label.
 * Lag per lease comes from `lag$` (see `estimateLag`), which reads the source and is polled separately.
 *
 * @example
 * ```ts
 * import { createChangeFeed, prometheusMetrics } from 'rxfeed';
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
  const prom = await loadPromClient();
  const registry = options.registry ?? prom.register;
  const prefix = options.prefix ?? 'rxfeed_';
  const owner = processor.owner;
  const owned = new Set<string>();
  const common = { registers: [registry] };

  const leasesOwned = new prom.Gauge({
    ...common,
    name: `${prefix}leases_owned`,
    help: 'Leases this host owns',
    labelNames: ['owner'],
    collect() {
      this.set({ owner }, owned.size);
    },
  });
  const inFlight = new prom.Gauge({
    ...common,
    name: `${prefix}in_flight_changes`,
    help: 'Changes read but not yet acknowledged by checkpointEvery (read credit in use)',
    labelNames: ['owner'],
    collect() {
      this.set({ owner }, processor.inFlightChanges);
    },
  });
  const leaseEvents = new prom.Counter({
    ...common,
    name: `${prefix}lease_events_total`,
    help: 'Lease ownership events (acquired, released, lost, stolen, split)',
    labelNames: ['owner', 'event'],
  });
  const checkpoints = new prom.Counter({ ...common, name: `${prefix}checkpoints_total`, help: 'Checkpoints written', labelNames: ['owner'] });
  const checkpointed = new prom.Counter({
    ...common,
    name: `${prefix}checkpointed_changes_total`,
    help: 'Changes covered by written checkpoints',
    labelNames: ['owner'],
  });
  const errors = new prom.Counter({
    ...common,
    name: `${prefix}errors_total`,
    help: 'Errors reported on the events stream, by error name (HandlerError = item failures)',
    labelNames: ['owner', 'error'],
  });
  const stalls = new prom.Counter({ ...common, name: `${prefix}stalls_total`, help: 'Stall warnings (dropped batches, exhausted credit)', labelNames: ['owner'] });

  const onEvent = (event: FeedEvent): void => {
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
      case 'leaseStolen':
        leaseEvents.inc({ owner, event: 'stolen' });
        break;
      case 'partitionSplit':
        leaseEvents.inc({ owner, event: 'split' });
        break;
      case 'checkpoint':
        checkpoints.inc({ owner });
        checkpointed.inc({ owner }, event.changes);
        break;
      case 'error':
        errors.inc({ owner, error: event.error.name });
        break;
      case 'stall':
        stalls.inc({ owner });
        break;
    }
  };
  const subscription = processor.events$.subscribe(onEvent);
  void [leasesOwned, inFlight]; // registered; they report through collect()
  const names = ['leases_owned', 'in_flight_changes', 'lease_events_total', 'checkpoints_total', 'checkpointed_changes_total', 'errors_total', 'stalls_total'];
  return {
    registry,
    stop() {
      subscription.unsubscribe();
      for (const name of names) registry.removeSingleMetric(prefix + name);
    },
  };
}
