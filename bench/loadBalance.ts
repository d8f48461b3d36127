/**
 * Balancing by lease count versus by load: 8 hot and 56 cold partitions over 4 hosts. Prints, side by side
 * for both modes, the ratio of the busiest host's change rate to the quietest's (1.0 = perfectly even) over
 * many placements of the hot partitions, and the lease counts per host.
 *
 * Both modes start from the same state (every lease free) and run rounds in which each host, in turn,
 * plans on the current listing and carries out its plan at once (a handoff completes within the round),
 * until a round changes nothing. Each lease's owner publishes its rate in the `rxfeed.load` property, as
 * owners would on renewal or checkpoint. The pure planners are the ones the coordinator uses
 * (`planBalance`) or would use (`planLoadBalance`); no I/O, so the figures are exact and repeatable.
 *
 * Run: npx tsx bench/loadBalance.ts [placements=50]
 */
import { planBalance, type BalancePlan } from '../src/leases/balancing.js';
import type { Lease } from '../src/leases/Lease.js';
import { planLoadBalance } from '../src/leases/loadBalancing.js';
import { LOAD_PROPERTY } from '../src/leases/protocol/index.js';
import { seededRandom } from '../src/internal/random.js';

const HOSTS = ['host-1', 'host-2', 'host-3', 'host-4'];
const HOT = 8;
const COLD = 56;
const HOT_RATE = 100; // changes per second
const COLD_RATE = 1;
const NOW = 1_000_000;
const EXPIRATION_MS = 60_000;
const placements = Number(process.argv[2] ?? 50);

type Planner = (leases: readonly Lease[], owner: string, nowMs: number, options: { expirationMs: number }) => BalancePlan;


function initialLeases(seed: number): Lease[] {
  const next = seededRandom(seed);
  const ids = Array.from({ length: HOT + COLD }, (_, i) => i);
  for (let i = ids.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  const hot = new Set(ids.slice(0, HOT));
  return Array.from({ length: HOT + COLD }, (_, i) => ({
    id: `bench.${String(i).padStart(3, '0')}`,
    leaseToken: String(i),
    feedRange: undefined,
    owner: null,
    continuation: null,
    timestampMs: NOW,
    epoch: 0,
    mode: 'latestVersion' as const,
    properties: { [LOAD_PROPERTY]: String(hot.has(i) ? HOT_RATE : COLD_RATE) },
    etag: '"0"',
  }));
}

/** Runs rounds until nothing changes; returns the final leases and the number of rounds. */
function settle(start: Lease[], planner: Planner): { leases: Lease[]; rounds: number } {
  let leases = start;
  for (let round = 1; round <= 100; round++) {
    let changed = false;
    for (const host of HOSTS) {
      const plan = planner(leases, host, NOW, { expirationMs: EXPIRATION_MS });
      const moving = new Set([...plan.take, ...plan.steal].map((l) => l.id));
      if (moving.size === 0) continue;
      changed = true;
      leases = leases.map((l) => (moving.has(l.id) ? { ...l, owner: host, timestampMs: NOW } : l));
    }
    if (!changed) return { leases, rounds: round };
  }
  throw new Error('did not settle in 100 rounds');
}

function perHost(leases: readonly Lease[]): { rates: number[]; counts: number[] } {
  const rates = HOSTS.map((h) => leases.filter((l) => l.owner === h).reduce((s, l) => s + Number(l.properties[LOAD_PROPERTY]), 0));
  const counts = HOSTS.map((h) => leases.filter((l) => l.owner === h).length);
  return { rates, counts };
}

const ratio = (values: number[]) => Math.max(...values) / Math.min(...values);
const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;

const byCount: number[] = [];
const byLoad: number[] = [];
const roundsLoad: number[] = [];
let example: { count: ReturnType<typeof perHost>; load: ReturnType<typeof perHost> } | undefined;
for (let seed = 1; seed <= placements; seed++) {
  const counted = settle(initialLeases(seed), planBalance);
  // Load balancing starts where count balancing settled (leases spread by count when no load was known yet).
  const loaded = settle(counted.leases, planLoadBalance);
  const c = perHost(counted.leases);
  const l = perHost(loaded.leases);
  byCount.push(ratio(c.rates));
  byLoad.push(ratio(l.rates));
  roundsLoad.push(loaded.rounds);
  if (seed === 1) example = { count: c, load: l };
}

const fmt = (x: number) => x.toFixed(2).padStart(7);
console.log(`${HOT} hot (${HOT_RATE}/s) + ${COLD} cold (${COLD_RATE}/s) partitions over ${HOSTS.length} hosts, ${placements} placements of the hot ones`);
console.log('max/min of per-host change rate      by count   by load   count/load');
for (const [name, q] of [['median', 0.5], ['p90', 0.9], ['worst', 1]] as const) {
  const a = quantile(byCount, q);
  const b = quantile(byLoad, q);
  console.log(`  ${name.padEnd(34)} ${fmt(a)}   ${fmt(b)}   ${fmt(a / b)}`);
}
console.log(`rounds to settle by load (after count): median ${quantile(roundsLoad, 0.5)}, worst ${quantile(roundsLoad, 1)}`);
if (example) {
  console.log(`placement 1, by count: rates ${example.count.rates.join(' / ')}, leases ${example.count.counts.join(' / ')}`);
  console.log(`placement 1, by load:  rates ${example.load.rates.join(' / ')}, leases ${example.load.counts.join(' / ')}`);
}
