/**
 * Writes a new document to each of a few partition keys at a steady rate until killed (a new id each time,
 * so a LatestVersion reader sees every write, not only the last of a key), each stamped with the time it
 * was written (`writtenAt`, ms since the epoch), so a reader can measure write → processed latency. Runs in
 * its own process (bench/idle.ts spawns it), so its CPU does not count against the reader's.
 *
 * Run: node --import tsx bench/busyWriter.ts <endpoint> <database> <container> <keys> <everyMs>
 */
import { CosmosClient } from '@azure/cosmos';
import { setTimeout as delay } from 'node:timers/promises';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';

const [endpoint, database, containerId, keys, everyMs] = process.argv.slice(2);
if (!endpoint || !database || !containerId || !keys || !everyMs) {
  console.error('usage: busyWriter.ts <endpoint> <database> <container> <keys> <everyMs>');
  process.exit(2);
}
const container = new CosmosClient({ endpoint, key: EMULATOR_KEY }).database(database).container(containerId);
const pks = Array.from({ length: Number(keys) }, (_, i) => `busy-${i}`);
for (let n = 0; ; n++) {
  const started = Date.now();
  await Promise.all(pks.map((pk) => container.items.create({ id: `${pk}-${n}`, pk, n, writtenAt: Date.now() })));
  await delay(Math.max(0, Number(everyMs) - (Date.now() - started)));
}
