/**
 * `rxfeed/metrics`: Prometheus metrics of a change feed processor. Needs the optional peer `prom-client`.
 *
 * @example
 * ```ts
 * import { createChangeFeed } from 'rxfeed';
 * import { prometheusMetrics } from 'rxfeed/metrics';
 * const feed = createChangeFeed(options);
 * const metrics = await prometheusMetrics(feed); // serve `metrics.registry.metrics()` on /metrics
 * ```
 *
 * @packageDocumentation
 */
export { prometheusMetrics, type PrometheusMetrics, type PrometheusMetricsOptions, type PrometheusLagOptions } from './prometheusMetrics.js';
