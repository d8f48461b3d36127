import type { Container } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { CliIO } from '../../src/cli/cosmosArgs.js';
import { createChangeFeed, type ChangeFeedProcessor } from '../../src/feed/index.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { freshContainer, writeDocs } from '../cosmos/helpers.js';

// The `rxfeed leases` and `rxfeed lag` commands through the real @azure/cosmos client, against the emulator
// (or COSMOS_ENDPOINT/COSMOS_KEY), next to a running processor.

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 3 });
});
afterAll(async () => {
  await cosmos.stop();
});

interface Run {
  code: number;
  out: string;
  err: string;
}

async function rxfeed(args: string[], env: Record<string, string | undefined> = { COSMOS_ENDPOINT: cosmos.endpoint, COSMOS_KEY: cosmos.key }): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIO = { out: (l) => out.push(l), err: (l) => err.push(l), env, status: () => undefined };
  const code = await main(args, io);
  const run = { code, out: out.join('\n'), err: err.join('\n') };
  // Whatever happens, the key is never printed.
  expect(run.out + run.err).not.toContain(cosmos.key);
  return run;
}

async function until(condition: () => Promise<boolean> | boolean, what: string, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('rxfeed leases / rxfeed lag', () => {
  let monitored: Container;
  let leaseContainer: Container;
  let processor: ChangeFeedProcessor<{ id: string }>;
  const processed: string[] = [];
  let flags: string[];

  beforeAll(async () => {
    monitored = await freshContainer(cosmos.client, 'cli');
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'db' });
    ({ container: leaseContainer } = await database.containers.createIfNotExists({ id: `${monitored.id}-leases`, partitionKey: { paths: ['/id'] } }));
    flags = ['--database', 'db', '--container', monitored.id, '--lease-container', leaseContainer.id, '--prefix', 'cli.', '--lease-expiration-ms', '3000'];
    await writeDocs(monitored, 60);
    processor = createChangeFeed<{ id: string }>({
      source: new CosmosSource(monitored),
      leases: new CosmosLeaseStore({ container: leaseContainer }),
      instanceName: 'host-a',
      leasePrefix: 'cli.',
      startFrom: 'beginning',
      pollIntervalMs: 100,
      leaseAcquireIntervalMs: 200,
      leaseRenewIntervalMs: 500,
      leaseExpirationMs: 3_000,
    });
    processor.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((batch) => processed.push(...batch.changes.map((c) => c.id)));
  });
  afterAll(async () => {
    await processor.stop();
  });

  const listed = async () => JSON.parse((await rxfeed(['leases', 'ls', '--json', ...flags])).out) as { leases: { leaseToken: string; owner: string | null; state: string; continuation: string | null; epoch: number }[] };

  it('ls shows each lease with its owner, state and checkpoint, as a table and as JSON', async () => {
    await until(async () => {
      const { leases } = await listed();
      return leases.length === 3 && leases.every((l) => l.owner === 'host-a' && l.continuation !== null) && new Set(processed).size === 60;
    }, 'the processor to own every lease and checkpoint all 60 changes');
    const { leases } = await listed();
    expect(leases.map((l) => l.state)).toEqual(['owned', 'owned', 'owned']);
    const table = await rxfeed(['leases', 'ls', ...flags]);
    expect(table.code).toBe(0);
    expect(table.out.split('\n')[0]).toMatch(/^LEASE\s+OWNER\s+STATE\s+EPOCH\s+AGE\s+CHECKPOINT$/);
    expect(table.out).toMatch(/host-a\s+owned/);
  });

  it('lag reports 0 behind once caught up, and the backlog after new writes while nothing reads', async () => {
    await until(async () => JSON.parse((await rxfeed(['lag', '--json', ...flags])).out).total === 0, 'lag 0');
    const table = await rxfeed(['lag', ...flags]);
    expect(table.out).toContain('total: 0 change(s) behind');
  });

  it('rewind refuses while the owner is live; --force fences it and the running processor replays everything', async () => {
    const refused = await rxfeed(['leases', 'rewind', '--to', 'beginning', ...flags]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/owned by a live host.*host-a/);
    const epochs = new Map((await listed()).leases.map((l) => [l.leaseToken, l.epoch]));

    const before = processed.length;
    const forced = await rxfeed(['leases', 'rewind', '--to', 'beginning', '--force', '--json', ...flags]);
    expect(forced.code).toBe(0);
    const { rewind } = JSON.parse(forced.out) as { rewind: { leaseToken: string; fenced: boolean }[] };
    expect(rewind.map((c) => c.fenced)).toEqual([true, true, true]);
    for (const l of (await listed()).leases) expect(l.epoch).toBeGreaterThan(epochs.get(l.leaseToken)!);

    await until(() => new Set(processed.slice(before)).size === 60, 'every change to be delivered again after the rewind');
  });

  it('rewind --to <ISO time> replays only what was written after it', async () => {
    await until(async () => (await listed()).leases.every((l) => l.owner === 'host-a'), 'the processor to take its leases back');
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // change timestamps have 1 s resolution
    const at = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await writeDocs(monitored, 10, 'late');
    await until(() => processed.filter((id) => id.startsWith('late')).length >= 10, 'the late writes');
    const before = processed.length;
    const forced = await rxfeed(['leases', 'rewind', '--to', at, '--force', ...flags]);
    expect(forced.code).toBe(0);
    await until(() => processed.slice(before).filter((id) => id.startsWith('late')).length >= 10, 'the late writes again');
    expect(processed.slice(before).filter((id) => !id.startsWith('late'))).toEqual([]);
  });

  it('release and reset refuse while live, then work once the processor stopped', async () => {
    expect((await rxfeed(['leases', 'reset', ...flags])).code).toBe(1);
    await processor.stop();
    const released = await rxfeed(['leases', 'release', ...flags]);
    expect(released.code).toBe(0);
    expect(released.out).toBe('nothing to release'); // a clean stop released them already
    const reset = await rxfeed(['leases', 'reset', ...flags]);
    expect(reset.code).toBe(0);
    expect(reset.out).toMatch(/\(deleted\)/);
    const after = await rxfeed(['leases', 'ls', ...flags]);
    expect(after.out).toContain("no leases under prefix 'cli.'");
    const { resources } = await leaseContainer.items.query({ query: 'SELECT c.id FROM c WHERE STARTSWITH(c.id, "cli.")' }).fetchAll();
    expect(resources).toEqual([]); // markers too: the next start bootstraps again
  });

  it('says what is missing: exit 2 with the reason, never a stack trace or the key', async () => {
    const noKey = await rxfeed(['leases', 'ls', '--database', 'db'], { COSMOS_ENDPOINT: cosmos.endpoint });
    expect(noKey).toMatchObject({ code: 2 });
    expect(noKey.err).toContain('no account key: pass --key or set COSMOS_KEY');
    const noTarget = await rxfeed(['leases', 'rewind', ...flags]);
    expect(noTarget.code).toBe(2);
    expect(noTarget.err).toContain('rewind needs --to');
    const unknown = await rxfeed(['leases', 'frobnicate']);
    expect(unknown.code).toBe(2);
    expect((await rxfeed(['leases', '--help'])).out).toContain('usage: rxfeed leases');
  });
});

describe('the rxfeed command as a process', () => {
  it('exits 2 with the reason when no endpoint is configured', async () => {
    const { spawnSync } = await import('node:child_process');
    const env = { ...process.env, COSMOS_ENDPOINT: '', COSMOS_KEY: '' };
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'lag', '--database', 'db'], { encoding: 'utf8', env });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('no account endpoint: pass --endpoint or set COSMOS_ENDPOINT');
  });
});
