import { afterEach, describe, expect, it, vi } from 'vitest';
import { main, type SpanNode } from '../../examples/tracing.js';
import { PG_URL, postgresUnavailable } from '../sinks/postgres.js';

// In a file of its own: the example registers OpenTelemetry's global providers and the pg instrumentation.
afterEach(() => vi.restoreAllMocks());

const flatten = (nodes: readonly SpanNode[], depth = 0): { node: SpanNode; depth: number }[] =>
  nodes.flatMap((node) => [{ node, depth }, ...flatten(node.children, depth + 1)]);

describe('examples/tracing.ts', () => {
  it('prints a trace where each batch is a CONSUMER span linked to its writes, with the pg query under it', { timeout: 180_000 }, async () => {
    const unavailable = await postgresUnavailable(); // printed with its reason; required under CI=true
    const lines: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void lines.push(args.join(' ')));
    const result = await main({ ...process.env, COSMOS_ENDPOINT: undefined, DATABASE_URL: unavailable ? undefined : PG_URL });
    const log = lines.join('\n');
    expect(result.ok, log).toBe(true);
    expect(log).toMatch(/^check: OK/m);
    expect(result.pg).toBe(!unavailable);

    const spans = flatten(result.roots);
    const batches = spans.filter(({ node }) => node.name === 'process orders' && Number(node.attributes['messaging.batch.message_count']) > 0);
    expect(batches.length).toBeGreaterThanOrEqual(1);
    for (const { node, depth } of batches) {
      expect(depth).toBe(0); // a root of its own: the checkout traces are links, not parents
      expect(node.kind).toBe('CONSUMER');
      expect(node.links).toBe(node.attributes['messaging.batch.message_count']);
      expect(node.attributes).toMatchObject({
        'messaging.system': 'azure_cosmosdb',
        'messaging.operation.type': 'process',
        'messaging.destination.name': 'orders',
        'messaging.client.id': 'tracing-example',
      });
      expect(node.children.map((c) => c.name).some((n) => (result.pg ? n.startsWith('pg.query') : n.startsWith('save ')))).toBe(true);
    }
    expect(spans.filter(({ node }) => node.name === 'lease acquired')).toHaveLength(2);
    expect(spans.filter(({ node }) => node.name === 'lease released')).toHaveLength(2);
    expect([...result.metrics.keys()]).toEqual(
      expect.arrayContaining(['messaging.client.consumed.messages', 'messaging.process.duration', 'messaging.client.operation.duration', 'rxfeed.request_charge']),
    );
    expect(result.metrics.get('messaging.process.duration')).toBe('s');
  });
});
