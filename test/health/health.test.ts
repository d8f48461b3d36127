/** health(), the node:http probe handler, and stopOnSignals: through the public API on virtual time. */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkpointEvery,
  createChangeFeed,
  CredentialsError,
  healthHandler,
  MemoryLeaseStore,
  MemorySource,
  stopOnSignals,
  type ChangeFeedOptions,
  type ProcessorHealth,
  type Source,
} from '../../src/index.js';
import { VirtualClock } from '../support/faults/clock.js';

interface Doc {
  id: string;
}

const TIMINGS = { pollIntervalMs: 50, leaseAcquireIntervalMs: 100, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000, telemetry: false } as const;

function world(source = new MemorySource<Doc>({ partitions: 2 })) {
  const clock = new VirtualClock(1_700_000_000_000);
  const options: ChangeFeedOptions<Doc> = { source, leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: 'h.', scheduler: clock, ...TIMINGS };
  return { clock, source, options };
}

describe('health()', () => {
  it('is idle before the run, ready once every owned lease was read, not ready while one is stalled, stopped after stop()', async () => {
    const { clock, source, options } = world();
    const feed = createChangeFeed<Doc>({ ...options, stallTimeoutMs: 1_000 });
    expect(feed.health()).toMatchObject({ status: 'idle', live: true, ready: false, owner: 'a', leases: [] });
    source.write({ id: 'x' });
    // Batches never acknowledged: the partition that got the change stalls.
    const subscription = feed.changes$.subscribe();
    await clock.advance(300);
    const running = feed.health();
    expect(running.status).toBe('running');
    expect(running.leases.map((l) => l.lease).sort()).toEqual(['0', '1']);
    expect(running.leases.every((l) => l.lastReadAt !== undefined)).toBe(true);
    expect(running.ready).toBe(true);
    await clock.advance(3_000);
    const stalled = feed.health();
    expect(stalled.leases.filter((l) => l.stalled).length).toBeGreaterThan(0);
    expect(stalled.ready).toBe(false);
    expect(stalled.live).toBe(true);
    const stopping = feed.stop();
    await clock.advance(60_000);
    await stopping;
    subscription.unsubscribe();
    expect(feed.health()).toMatchObject({ status: 'stopped', ready: false, live: true, leases: [] });
  });

  it('is not live after a fatal error, and says which', async () => {
    const clock = new VirtualClock(0);
    const base = new MemorySource<Doc>({ partitions: 1 });
    // A source whose every read is refused: bad credentials end the processor.
    const source: Source<Doc> = {
      description: base.description,
      mode: base.mode,
      listPartitions: (signal) => base.listPartitions(signal),
      read: () => Promise.reject(new CredentialsError(401)),
    };
    const feed = createChangeFeed<Doc>({ ...world().options, source, scheduler: clock });
    const errors: unknown[] = [];
    const subscription = feed.changes$.pipe(checkpointEvery(1)).subscribe({ error: (e) => errors.push(e) });
    await clock.advance(1_000);
    expect(errors).toHaveLength(1);
    const health = feed.health();
    expect(health).toMatchObject({ status: 'failed', live: false, ready: false });
    expect(health.lastError?.name).toBe('CredentialsError');
    subscription.unsubscribe();
  });
});

describe('healthHandler', () => {
  const servers: ReturnType<typeof createServer>[] = [];
  afterEach(() => servers.splice(0).forEach((s) => s.close()));

  async function serve(health: ProcessorHealth) {
    const server = createServer(healthHandler({ health: () => health }));
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    return async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: res.status, body: await res.text() };
    };
  }

  const base: ProcessorHealth = { status: 'running', live: true, ready: true, owner: 'a', leases: [], lastError: undefined };

  it('answers /livez and /readyz with 200 or 503 and the snapshot, anything else with 404', async () => {
    const ok = await serve(base);
    expect(await ok('/livez')).toMatchObject({ status: 200 });
    const ready = await ok('/readyz?verbose');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toMatchObject({ status: 'running', owner: 'a' });
    expect((await ok('/metrics')).status).toBe(404);
    const notReady = await serve({ ...base, ready: false });
    expect((await notReady('/readyz')).status).toBe(503);
    expect((await notReady('/livez')).status).toBe(200);
    const dead = await serve({ ...base, status: 'failed', live: false, ready: false });
    expect((await dead('/livez')).status).toBe(503);
  });
});

describe('stopOnSignals', () => {
  it('stops gracefully on the first signal and exits 0; a second signal exits at once', async () => {
    const clock = new VirtualClock(0);
    let resolveStop!: () => void;
    const stops: number[] = [];
    const processor = { stop: () => new Promise<void>((resolve) => ((resolveStop = resolve), stops.push(clock.now()))) };
    const exits: number[] = [];
    const off = stopOnSignals(processor, { exit: (code) => exits.push(code), scheduler: clock, signals: ['SIGUSR2'] });
    try {
      process.emit('SIGUSR2', 'SIGUSR2');
      expect(stops).toHaveLength(1);
      resolveStop();
      await clock.advance(1);
      expect(exits).toEqual([0]);
      process.emit('SIGUSR2', 'SIGUSR2');
      expect(exits).toEqual([0, 128]);
    } finally {
      off();
    }
  });

  it('exits 1 when the stop does not finish within timeoutMs', async () => {
    const clock = new VirtualClock(0);
    const exits: number[] = [];
    const off = stopOnSignals({ stop: () => new Promise<void>(() => undefined) }, { exit: (code) => exits.push(code), scheduler: clock, timeoutMs: 5_000, signals: ['SIGUSR2'] });
    try {
      process.emit('SIGUSR2', 'SIGUSR2');
      await clock.advance(4_999);
      expect(exits).toEqual([]);
      await clock.advance(1);
      expect(exits).toEqual([1]);
    } finally {
      off();
    }
    expect(() => stopOnSignals({ stop: async () => undefined }, { timeoutMs: 0 })).toThrow(/timeoutMs/);
  });
});
