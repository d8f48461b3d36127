/**
 * Runs many simulation seeds: `npm run sim -- --seeds 50 --faults lease,source,view,host --hosts 2-6`.
 * Options: `--seed N` (one seed, replays a failure exactly), `--seeds N` (seeds from `--from`, default 1),
 * `--faults a,b` (of lease, source, view, host, sink, or `all`/`none`; default all), `--hosts min-max`
 * (default 2-6), `--chaos-ms N` (default 30000), `--on-error retry|restart` (default retry), `--balance count|load`
 * (default count), `--view guarded|exactlyOnce` (default guarded), `--groups on|off` (default off),
 * `--form rx|handler` (default rx), `--policy deadLetter|halt` (default deadLetter), `--start beginning|now|time|function`
 * (default beginning), `--lease-scheme rxfeed|dotnet` (default rxfeed), `--positions lsn|opaque` (default lsn),
 * `--relay jetstream|amqp|off` (default off; Rx form only), `--sse on|off` (default off; Rx form only), `--source memory|sdk`
 * (default memory), `--iterators N|default` (SDK mode: each process's iterator bound; default drawn per process), `--verbose`.
 * With `--faults all`, options not given are drawn per seed (the whole product; see test/sim/README.md).
 * Prints one line per failing seed that replays it; exits 1 when any seed failed.
 */
import { drawVariant, FAULT_SETS, type FaultSet, replayLine, runSimulation, type SimConfig, type Variant } from './simulation.js';

function parse(argv: readonly string[]): { configs: SimConfig[]; verbose: boolean } {
  const args = new Map<string, string>();
  let verbose = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--verbose') verbose = true;
    else if (arg.startsWith('--') && i + 1 < argv.length) args.set(arg.slice(2), argv[++i]!);
    else throw new Error(`unexpected argument ${arg}; see test/sim/run.ts for the options`);
  }
  const faultsArg = args.get('faults') ?? 'all';
  // `twin` (a misconfigured instanceName) is asked for by name: see test/sim/README.md.
  const all = FAULT_SETS.filter((f) => f !== 'twin');
  const faults = (faultsArg === 'all' ? all : faultsArg === 'none' ? [] : faultsArg.split(',')) as FaultSet[];
  for (const f of faults) if (!FAULT_SETS.includes(f)) throw new Error(`--faults: unknown fault set ${f} (use ${FAULT_SETS.join(', ')})`);
  const [min, max] = (args.get('hosts') ?? '2-6').split('-').map(Number);
  if (!Number.isInteger(min) || !Number.isInteger(max) || min! < 1 || max! < min! || max! > 6) throw new Error('--hosts: give min-max, e.g. 2-6');
  const chaosMs = args.has('chaos-ms') ? Number(args.get('chaos-ms')) : undefined;
  const onError = args.get('on-error');
  if (onError !== undefined && onError !== 'retry' && onError !== 'restart') throw new Error('--on-error: give retry or restart');
  const balanceBy = args.get('balance');
  if (balanceBy !== undefined && balanceBy !== 'count' && balanceBy !== 'load') throw new Error('--balance: give count or load');
  const view = args.get('view');
  if (view !== undefined && view !== 'guarded' && view !== 'exactlyOnce') throw new Error('--view: give guarded or exactlyOnce');
  const groups = args.get('groups');
  if (groups !== undefined && groups !== 'on' && groups !== 'off') throw new Error('--groups: give on or off');
  const form = args.get('form');
  if (form !== undefined && form !== 'rx' && form !== 'handler') throw new Error('--form: give rx or handler');
  const policy = args.get('policy');
  if (policy !== undefined && policy !== 'deadLetter' && policy !== 'halt') throw new Error('--policy: give deadLetter or halt');
  const start = args.get('start');
  if (start !== undefined && !['beginning', 'now', 'time', 'function'].includes(start)) throw new Error('--start: give beginning, now, time or function');
  const leaseScheme = args.get('lease-scheme');
  if (leaseScheme !== undefined && leaseScheme !== 'rxfeed' && leaseScheme !== 'dotnet') throw new Error('--lease-scheme: give rxfeed or dotnet');
  const positions = args.get('positions');
  if (positions !== undefined && positions !== 'lsn' && positions !== 'opaque') throw new Error('--positions: give lsn or opaque');
  const relay = args.get('relay');
  if (relay !== undefined && relay !== 'jetstream' && relay !== 'amqp' && relay !== 'off') throw new Error('--relay: give jetstream, amqp or off');
  if (relay !== undefined && relay !== 'off' && form === 'handler') throw new Error('--relay: the relay runs in the Rx form only (--form rx)');
  const sse = args.get('sse');
  if (sse !== undefined && sse !== 'on' && sse !== 'off') throw new Error('--sse: give on or off');
  if (sse === 'on' && form === 'handler') throw new Error('--sse: the hub runs in the Rx form only (--form rx)');
  const source = args.get('source');
  if (source !== undefined && source !== 'memory' && source !== 'sdk') throw new Error('--source: give memory or sdk');
  if (source === 'sdk' && positions === 'opaque') throw new Error('--positions opaque: not in the SDK mode (--source sdk), which reads Cosmos DB continuations');
  const iteratorsArg = args.get('iterators');
  const iterators = iteratorsArg === undefined || iteratorsArg === 'default' ? iteratorsArg : Number(iteratorsArg);
  if (typeof iterators === 'number' && !(Number.isInteger(iterators) && iterators >= 1)) throw new Error('--iterators: give a count of at least 1, or default');
  const explicit: Variant = {
    ...(positions ? { positions } : {}),
    ...(start ? { start: start as NonNullable<Variant['start']> } : {}),
    ...(leaseScheme ? { leaseScheme } : {}),
    ...(balanceBy ? { balanceBy } : {}),
    ...(view ? { view } : {}),
    ...(groups ? { groups: groups === 'on' } : {}),
    ...(form ? { form } : {}),
    ...(policy ? { policy } : {}),
    ...(relay ? { relay } : {}),
    ...(sse ? { sse } : {}),
    ...(source ? { source: source as NonNullable<Variant['source']> } : {}),
  };
  // `--faults all` is the whole product: each seed draws a variant (view mode, group keys, balancing, ...);
  // options given explicitly win. A list of fault sets runs the classic variant (old replay lines stay exact).
  const variant = (seed: number): Variant => {
    if (faultsArg !== 'all') return explicit;
    // `--sse on` and `--relay jetstream|amqp` run in the Rx form: a seed that drew the handler form runs the Rx
    // form instead (a handler-form run has no relay, and took every change it delivered for one relayed).
    const rxOnly = sse === 'on' || (relay !== undefined && relay !== 'off');
    const drawn: Variant = { ...drawVariant(seed), ...(rxOnly ? { form: 'rx' as const } : {}), ...explicit };
    // `--source sdk` with `--faults all`: positions drawn as opaque do not apply (see sdkLimits).
    return drawn.source === 'sdk' && positions === undefined ? { ...drawn, positions: 'lsn' } : drawn;
  };
  const seeds = args.has('seed') ? [Number(args.get('seed'))] : Array.from({ length: Number(args.get('seeds') ?? 20) }, (_, i) => Number(args.get('from') ?? 1) + i);
  return {
    verbose,
    configs: seeds.map((seed) => ({ seed, faults, hosts: { min: min!, max: max! }, ...(chaosMs !== undefined ? { chaosMs } : {}), ...(onError ? { onError } : {}), ...variant(seed), ...(iterators !== undefined ? { iterators } : {}) })),
  };
}

const argv = process.argv.slice(2);
const findAt = argv.indexOf('--find');
if (findAt >= 0) {
  // Shrinks towards the smallest config showing one invariant: fewest hosts, then shortest chaos, then lowest seed.
  const invariant = argv[findAt + 1]!;
  const rest = [...argv.slice(0, findAt), ...argv.slice(findAt + 2)];
  const base = parse([...rest, '--seed', '1']).configs[0]!;
  const started = performance.now();
  search: for (const max of [2, 3, 4, 6]) {
    for (const chaosMs of [3_000, 10_000, 30_000]) {
      for (let seed = 1; seed <= 100; seed++) {
        const config = { ...base, seed, hosts: { min: Math.min(2, max), max }, chaosMs };
        const result = await runSimulation(config);
        const hit = result.violations.find((v) => v.invariant === invariant);
        if (hit) {
          console.log(`${invariant} (${hit.detail} at ${hit.atMs} ms): ${replayLine(config)}`);
          break search;
        }
      }
    }
  }
  console.log(`searched in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  process.exit(0);
}

const { configs, verbose } = parse(argv);
let failed = 0;
const byInvariant = new Map<string, number>();
const totals = new Map<string, number>();
const started = performance.now();
for (const config of configs) {
  const t0 = performance.now();
  const result = await runSimulation(config);
  for (const [k, n] of Object.entries(result.stats.faults)) totals.set(k, k.endsWith('.max') ? Math.max(totals.get(k) ?? 0, n) : (totals.get(k) ?? 0) + n);
  if (verbose) {
    const s = result.stats;
    console.log(`seed ${config.seed}: ${s.mode}, ${s.partitions} partitions, ${s.writes} writes, ${s.deliveries} deliveries, ${s.actions} actions, ${Math.round(performance.now() - t0)} ms`);
  }
  if (result.violations.length > 0) {
    failed++;
    const names = [...new Set(result.violations.map((v) => v.invariant))];
    for (const n of names) byInvariant.set(n, (byInvariant.get(n) ?? 0) + 1);
    const first = result.violations[0]!;
    console.log(`FAIL ${names.join(',')} (${first.detail} at ${first.atMs} ms): ${replayLine(config)}`);
    if (verbose) for (const v of result.violations) console.log(`  ${v.invariant} at ${v.atMs} ms: ${v.detail}`);
  }
}
console.log(`${configs.length - failed}/${configs.length} seeds passed in ${((performance.now() - started) / 1000).toFixed(1)} s`);
if (byInvariant.size > 0) console.log(`failing seeds by invariant: ${[...byInvariant].map(([k, n]) => `${k} ${n}`).join(', ')}`);
console.log(`faults injected: ${[...totals].sort().map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
process.exitCode = failed > 0 ? 1 : 0;
