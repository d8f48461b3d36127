/**
 * What one lease write costs through the SDK, client and emulator CPU: a `replace` conditional on the etag
 * (what every checkpoint and renewal is), 100 leases at a time, against the same 100 replaces sent as one
 * `items.bulk` request (per-operation `ifMatch`; one request for leases in one physical partition, as a lease
 * container is). rxfeed sends single replaces; this measures what grouping them would save. No assertions.
 *
 * Run: npx tsx bench/leaseWriteCost.ts   (env: BENCH_LEASES=100 BENCH_ROUNDS=20)
 */
import { BulkOperationType, CosmosClient, type OperationInput } from '@azure/cosmos';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';
import { processCpuMs, spawnEmulator } from './spawnEmulator.js';

const LEASES = Number(process.env.BENCH_LEASES ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);

const emulator = await spawnEmulator();
const emulatorCpuMs = (): number => processCpuMs(emulator.child.pid) ?? NaN;
const client = new CosmosClient({ endpoint: emulator.endpoint, key: EMULATOR_KEY });
try {
  const { database } = await client.databases.createIfNotExists({ id: 'bench' });
  const { container } = await database.containers.createIfNotExists({ id: 'lease-writes', partitionKey: { paths: ['/id'] } });
  const docs = Array.from({ length: LEASES }, (_, i) => ({
    id: `lease-${i}`,
    version: 0,
    LeaseToken: String(i),
    Owner: 'host',
    ContinuationToken: '"1"',
    timestamp: new Date().toISOString(),
    properties: {},
    epoch: 1,
  }));
  const etags: string[] = [];
  for (const doc of docs) etags.push((await container.items.upsert(doc)).resource!._etag!);

  const single = async (round: number): Promise<void> => {
    await Promise.all(
      docs.map(async (doc, i) => {
        const body = { ...doc, ContinuationToken: `"${round}"` };
        const { resource } = await container.item(doc.id, doc.id).replace(body, { accessCondition: { type: 'IfMatch', condition: etags[i]! } });
        etags[i] = resource!._etag!;
      }),
    );
  };
  const bulk = async (round: number): Promise<void> => {
    const operations: OperationInput[] = docs.map((doc, i) => ({
      operationType: BulkOperationType.Replace,
      id: doc.id,
      partitionKey: doc.id,
      ifMatch: etags[i]!,
      resourceBody: { ...doc, ContinuationToken: `"${round}"` },
    }));
    const results = await container.items.bulk(operations);
    results.forEach((result, i) => {
      if (result.statusCode !== 200) throw new Error(`bulk replace of ${docs[i]!.id}: status ${result.statusCode}`);
      etags[i] = result.eTag!;
    });
  };

  console.log(`node ${process.version}; emulator (own process); ${LEASES} leases written ${ROUNDS} times each way, after 5 untimed rounds; 2 passes`);
  const rows: string[] = [];
  for (let pass = 0; pass < 2; pass++) {
    for (const [name, write] of [[`${LEASES} concurrent replaces (rxfeed today)`, single], [`one items.bulk of ${LEASES} replaces`, bulk]] as const) {
      for (let round = 0; round < 5; round++) await write(round);
      const emulatorBefore = emulatorCpuMs();
      const cpu = process.cpuUsage();
      const started = performance.now();
      for (let round = 0; round < ROUNDS; round++) await write(round);
      const used = process.cpuUsage(cpu);
      const writes = LEASES * ROUNDS;
      rows.push(
        `pass ${pass + 1}, ${name.padEnd(36)} | client ${((used.user + used.system) / 1000 / writes).toFixed(3)} ms/write | ` +
          `emulator ${((emulatorCpuMs() - emulatorBefore) / writes).toFixed(3)} ms/write | ${((performance.now() - started) / ROUNDS).toFixed(1)} ms per ${LEASES}`,
      );
    }
  }
  console.log(rows.join('\n'));
} finally {
  client.dispose();
  emulator.child.kill('SIGTERM');
}
