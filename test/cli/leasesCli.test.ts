import type { Container } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { CliIO } from '../../src/cli/cosmosArgs.js';
import { createChangeFeed, type ChangeFeedProcessor } from '../../src/feed/index.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { dotnetLeasePrefix } from '../../src/leases/dotnetLeasePrefix.js';
import { seedDotnetLeases } from '../support/dotnetLeases.js';
import { drainPartition, freshContainer, writeDocs, type Doc } from '../cosmos/helpers.js';

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

  it('release and reset refuse while live, naming --force, then work once the processor stopped', async () => {
    const refused = await rxfeed(['leases', 'reset', ...flags]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/owned by a live host \(host-a\).*pass --force to reset them anyway/);
    await processor.stop();
    const elsewhere = await rxfeed(['leases', 'ls', ...flags.slice(0, -4), '--prefix', 'nope.']);
    expect(elsewhere.out).toContain("no leases under prefix 'nope.'");
    expect(elsewhere.out).toMatch(/prefixes in lease container '.*': 'cli\.'$/m);
    const released = await rxfeed(['leases', 'release', ...flags]);
    expect(released.code).toBe(0);
    expect(released.out).toBe('nothing to release'); // a clean stop released them already
    const reset = await rxfeed(['leases', 'reset', ...flags]);
    expect(reset.code).toBe(0);
    expect(reset.out).toMatch(/\(deleted\)/);
    expect(reset.out).toMatch(/the processor bootstraps again from its startFrom at its next start .*new leases start above epoch \d+/);
    const after = await rxfeed(['leases', 'ls', ...flags]);
    expect(after.out).toContain("no leases under prefix 'cli.'");
    const { resources } = await leaseContainer.items.query<{ id: string; tomb?: boolean }>({ query: 'SELECT c.id, c.rxfeedTombstone AS tomb FROM c WHERE STARTSWITH(c.id, "cli.")' }).fetchAll();
    // Markers gone (the next start bootstraps again); the epoch floor kept; each lease left a tombstone keeping its
    // epoch (a create landing late cannot bring it back below it), which `ls` above does not show.
    expect(resources.sort((a, b) => (a.id < b.id ? -1 : 1))).toEqual([{ id: 'cli..floor' }, { id: 'cli.0', tomb: true }, { id: 'cli.1', tomb: true }, { id: 'cli.2', tomb: true }]);
    const none = await rxfeed(['leases', 'ls', ...flags.slice(0, -4), '--prefix', 'nope.']);
    expect(none.out).toMatch(/lease container '.*' holds no leases/);
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

describe('rxfeed leases / rxfeed lag on a lease container in the .NET layout (--lease-scheme dotnet)', () => {
  const PROCESSOR = 'orders-view';
  let monitored: Container;
  let leaseContainer: Container;
  let prefix: string;
  let flags: string[];
  let byName: string[];
  const docs = async () => (await leaseContainer.items.readAll<Record<string, unknown>>().fetchAll()).resources;
  const ids = async () => (await docs()).map((d) => d.id as string).sort();

  beforeAll(async () => {
    monitored = await freshContainer(cosmos.client, 'cli-dotnet');
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'db' });
    ({ container: leaseContainer } = await database.containers.createIfNotExists({ id: `${monitored.id}-leases`, partitionKey: { paths: ['/id'] } }));
    // What `--processor-name` computes from the --endpoint host and --container's _rid.
    prefix = await dotnetLeasePrefix({ container: monitored, endpoint: cosmos.endpoint, processorName: PROCESSOR });
    const common = ['--database', 'db', '--container', monitored.id, '--lease-container', leaseContainer.id, '--lease-scheme', 'dotnet'];
    flags = [...common, '--prefix', prefix];
    byName = [...common, '--processor-name', PROCESSOR];

    const source = new CosmosSource<Doc>(monitored);
    const [p0, p1, p2] = await source.listPartitions();
    await writeDocs(monitored, 30, 'a');
    const checkpoint0 = (await drainPartition(source, p0!, 'beginning')).position;
    const checkpoint1 = (await drainPartition(source, p1!, 'beginning')).position;
    await writeDocs(monitored, 30, 'b');
    // Left by .NET hosts: lease 0 held by a live one, lease 1 by one that died, lease 2 never checkpointed.
    await seedDotnetLeases(
      leaseContainer,
      prefix,
      [
        { partition: p0!, owner: 'dotnet-live', continuation: checkpoint0, timestampMs: Date.now() },
        { partition: p1!, owner: 'dotnet-dead', continuation: checkpoint1, timestampMs: Date.now() - 3_600_000 },
        { partition: p2!, owner: null, continuation: null, timestampMs: Date.now() - 3_600_000 },
      ],
      { info: true, lock: true },
    );
    // Neighbours no command may touch: another .NET processor on the same container, and an rxfeed processor.
    const other = await dotnetLeasePrefix({ container: monitored, endpoint: cosmos.endpoint, processorName: 'billing' });
    await seedDotnetLeases(leaseContainer, other, [{ partition: p0!, owner: null, continuation: checkpoint0, timestampMs: Date.now() }]);
    await new CosmosLeaseStore({ container: leaseContainer }).createIfAbsent({
      id: 'cli-other.0',
      leaseToken: '0',
      feedRange: p0!.range,
      owner: null,
      continuation: null,
      timestampMs: Date.now(),
      epoch: 0,
      mode: 'latestVersion',
      properties: {},
    });
  });

  type Listed = { leases: { id: string; leaseToken: string; owner: string | null; state: string; continuation: string | null; epoch: number }[] };
  const listed = async (by = flags) => JSON.parse((await rxfeed(['leases', 'ls', '--json', ...by])).out) as Listed;

  it('ls shows the .NET leases with their owners and checkpoints, by --prefix or --processor-name, never the markers', async () => {
    const { leases } = await listed();
    expect(leases.map((l) => [l.id, l.owner, l.state])).toEqual([
      [`${prefix}..0`, 'dotnet-live', 'owned'],
      [`${prefix}..1`, 'dotnet-dead', 'expired'],
      [`${prefix}..2`, null, 'free'],
    ]);
    expect(leases[0]!.continuation).toMatch(/^"\d+"$/);
    expect(leases[2]!.continuation).toBeNull();
    const named = await listed(byName);
    expect(named.leases.map((l) => [l.id, l.owner, l.continuation])).toEqual(leases.map((l) => [l.id, l.owner, l.continuation]));
    const table = await rxfeed(['leases', 'ls', ...byName]);
    expect(table.out.split('\n')).toHaveLength(4); // header and three leases
    expect(table.out).toMatch(/^0\s+dotnet-live\s+owned/m);
  });

  it('lag counts the changes after each .NET checkpoint (the whole partition for one never checkpointed)', async () => {
    const source = new CosmosSource<Doc>(monitored);
    const expected = new Map<string, number>();
    for (const l of (await listed()).leases) {
      const partition = (await source.listPartitions()).find((p) => p.id === l.leaseToken)!;
      expected.set(l.leaseToken, (await drainPartition(source, partition, l.continuation === null ? 'beginning' : { position: l.continuation })).changes.length);
    }
    const { leases, total } = JSON.parse((await rxfeed(['lag', '--json', ...byName])).out) as { leases: { leaseToken: string; estimatedLag: number }[]; total: number };
    expect(leases.map((l) => [l.leaseToken, l.estimatedLag])).toEqual([...expected]);
    expect(total).toBe([...expected.values()].reduce((a, b) => a + b, 0));
    expect(total).toBeGreaterThan(30); // the 30 later writes, and lease 2's whole partition
    expect((await rxfeed(['lag', ...flags])).out).toContain(`total: ${total} change(s) behind`);
  });

  it('rewind and release act only on the selected .NET leases, refusing while the live one is held unless --force', async () => {
    const before = new Map((await docs()).map((d) => [d.id as string, d._etag]));
    const refused = await rxfeed(['leases', 'rewind', '--to', 'beginning', ...byName]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/owned by a live host \(dotnet-live\): 0\. .*--force/);
    expect((await rxfeed(['leases', 'release', ...flags])).code).toBe(1);

    const rewound = await rxfeed(['leases', 'rewind', '--to', 'beginning', '--lease', '1', '--json', ...byName]);
    expect(rewound.code).toBe(0);
    expect(JSON.parse(rewound.out)).toMatchObject({ rewind: [{ leaseToken: '1', previousOwner: 'dotnet-dead', fenced: false }] });
    const released = await rxfeed(['leases', 'release', '--force', '--json', ...flags]);
    expect(JSON.parse(released.out)).toMatchObject({ release: [{ leaseToken: '0', previousOwner: 'dotnet-live', fenced: true }] });

    const after = await docs();
    const changed = after.filter((d) => before.get(d.id as string) !== d._etag).map((d) => d.id);
    expect(changed.sort()).toEqual([`${prefix}..0`, `${prefix}..1`]);
    // still .NET documents: same id, LeaseToken and version, the owner cleared
    for (const token of ['0', '1']) expect(after.find((d) => d.id === `${prefix}..${token}`)).toMatchObject({ LeaseToken: token, version: 0, Owner: null });
  });

  it('reset deletes exactly the .NET leases and their .info / .lock markers', async () => {
    const neighbours = (await ids()).filter((id) => !id.startsWith(prefix));
    expect(neighbours).toHaveLength(3);
    expect(await ids()).toEqual(expect.arrayContaining([`${prefix}.info`, `${prefix}.lock`]));
    const reset = await rxfeed(['leases', 'reset', '--json', ...byName]);
    expect(reset.err).toBe('');
    expect(reset.code).toBe(0);
    expect((JSON.parse(reset.out) as { reset: { leaseToken: string }[] }).reset.map((c) => c.leaseToken)).toEqual(['0', '1', '2']);
    // The epoch floor stays (not under <prefix>.., where .NET tools list leases): rxfeed raised epochs above 0. So
    // do the records of the deleted leases' epochs (<prefix>.gone.<token>, outside <prefix>.. too).
    const kept = (id: string) => id === `${prefix}.floor` || id.startsWith(`${prefix}.gone.`);
    expect((await ids()).filter((id) => !kept(id))).toEqual(neighbours);
    expect(await ids()).toContain(`${prefix}.floor`);
    expect((await ids()).filter((id) => id.startsWith(`${prefix}.gone.`)).every((id) => ['0', '1', '2'].includes(id.slice(`${prefix}.gone.`.length)))).toBe(true);
    expect((await rxfeed(['leases', 'ls', ...flags])).out).toContain(`no leases under prefix '${prefix}' (lease scheme dotnet)`);
  });

  it('says how to name .NET leases: exit 2 for a missing or contradicting flag, 1 for a prefix with the separator', async () => {
    const base = ['leases', 'ls', '--database', 'db', '--container', monitored.id, '--lease-container', leaseContainer.id];
    const cases: [string[], RegExp][] = [
      [['--lease-scheme', 'dotnet'], /--lease-scheme dotnet needs the \.NET lease prefix: pass --processor-name <name>.* or --prefix/],
      [['--processor-name', PROCESSOR], /--processor-name names a \.NET processor .*: add --lease-scheme dotnet/],
      [['--lease-scheme', 'dotnet', '--processor-name', PROCESSOR, '--prefix', prefix], /either --prefix or --processor-name, not both/],
      [['--lease-scheme', 'java'], /--lease-scheme must be rxfeed or dotnet, got java/],
    ];
    for (const [extra, message] of cases) {
      const run = await rxfeed([...base, ...extra]);
      expect(run.code).toBe(2);
      expect(run.err).toMatch(message);
    }
    const noContainer = await rxfeed(['leases', 'ls', '--database', 'db', '--lease-scheme', 'dotnet', '--processor-name', PROCESSOR]);
    expect(noContainer).toMatchObject({ code: 2 });
    expect(noContainer.err).toContain('--processor-name needs --container');
    const separator = await rxfeed([...base, '--lease-scheme', 'dotnet', '--prefix', `${prefix}..`]);
    expect(separator.code).toBe(1);
    expect(separator.err).toMatch(/leasePrefix: .* ends with '\.': with leaseScheme 'dotnet' pass the \.NET prefix without the '\.\.' separator/);
    for (const command of [['leases', '--help'], ['lag', '--help']]) {
      expect((await rxfeed(command)).out).toMatch(/--lease-scheme[\s\S]*--processor-name/);
    }
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
