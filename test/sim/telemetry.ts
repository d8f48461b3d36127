import { MeterProvider, type MetricData, MetricReader } from '@opentelemetry/sdk-metrics';
import type { FeedEvent } from '../../src/core/events.js';
import type { Sim } from './context.js';

/** Share of seeds whose hosts run with an OpenTelemetry meter (drawn from `randomFor('telemetry')`). */
const TELEMETRY_SHARE = 0.2;

/** A reader collected on demand: no export interval, no timer (the run's time is virtual). */
class CollectingReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

const sum = (metric: MetricData | undefined): number =>
  (metric?.dataPoints as { value: number }[] | undefined)?.reduce((n, p) => n + p.value, 0) ?? 0;

/** The lease life-cycle events `rxfeed.lease.events` counts. */
const LEASE_EVENTS = new Set<FeedEvent['type']>(['leaseAcquired', 'leaseReleased', 'leaseLost', 'leaseTakenOver', 'partitionSplit']);

/**
 * OpenTelemetry in the simulation: on a fifth of the seeds (drawn from a PRNG of its own), every host runs with
 * one shared `MeterProvider` of `@opentelemetry/sdk-metrics` (a reader collected at the end, no export timer),
 * and the counters must add up to what the hosts' events said (`telemetry-differs-from-events`):
 * `rxfeed.dead_letters` to the changes the `deadLettered` events announced (which `dead-letter-*` ties to
 * the store), `rxfeed.checkpoints` to the `checkpoint` events, `rxfeed.lease.events` to the lease
 * life-cycle events. Recording is synchronous: the runs' schedules are those of the seeds without it.
 */
export class SimTelemetry {
  readonly #reader = new CollectingReader();
  /** The provider every host's `telemetry.meterProvider` is. */
  readonly meterProvider = new MeterProvider({ readers: [this.#reader] });
  readonly #counted = { deadLetters: 0, checkpoints: 0, leaseEvents: 0 };

  private constructor(private readonly sim: Sim) {}

  /** The telemetry of this run, or `undefined` on the seeds that run without it. */
  static draw(sim: Sim): SimTelemetry | undefined {
    return sim.randomFor('telemetry')() < TELEMETRY_SHARE ? new SimTelemetry(sim) : undefined;
  }

  /** A host's event, counted as the metrics should count it. */
  onEvent(event: FeedEvent): void {
    if (event.type === 'deadLettered') this.#counted.deadLetters += event.lsns.length;
    else if (event.type === 'checkpoint') this.#counted.checkpoints++;
    else if (LEASE_EVENTS.has(event.type)) this.#counted.leaseEvents++;
  }

  /** At the end of the run: the counters against the events. */
  async finish(): Promise<void> {
    const { resourceMetrics } = await this.#reader.collect();
    const metrics = new Map(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]));
    const measured = { deadLetters: sum(metrics.get('rxfeed.dead_letters')), checkpoints: sum(metrics.get('rxfeed.checkpoints')), leaseEvents: sum(metrics.get('rxfeed.lease.events')) };
    for (const [name, metric] of [['deadLetters', 'rxfeed.dead_letters'], ['checkpoints', 'rxfeed.checkpoints'], ['leaseEvents', 'rxfeed.lease.events']] as const) {
      if (measured[name] !== this.#counted[name]) {
        this.sim.violations.report('telemetry-differs-from-events', `${metric} sums to ${measured[name]}, the events say ${this.#counted[name]}`);
      }
    }
    this.sim.tally('telemetry.deadLetters', measured.deadLetters);
    this.sim.tally('telemetry.runs');
    await this.meterProvider.shutdown();
  }
}
