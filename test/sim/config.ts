import type { FeedMode } from '../../src/core/Partition.js';
import { hashString, seededRandom } from '../../src/internal/random.js';
import type { ViewMode } from '../../src/sinks/ViewStore.js';

/**
 * Which faults a run injects: lease store, source (errors, throttling, slow reads, splits, storms), reads
 * that hang until aborted (`hang`), view store, hosts (crash, pause past expiry, graceful stop, join), sink
 * step, a host started under the name of a live one (`twin`: a misconfigured `instanceName`), and a clock
 * per host (`clock`: skew, drift, steps, event loops that run timers late), and what arrives late (`late`:
 * view writes that land seconds later, as a long transaction or a pool wait does; lease listings and reads
 * that lag the store's writes by 50–400 ms), and hosts that stop or
 * crash while they bootstrap, leaving the bootstrap lock behind (`bootstrap`), and changes no handler can
 * process, handlers that fail once, and a dead-letter store that fails, slows down or loses replies (`poison`),
 * and the source's other shapes (`topology`: merges read on as EPK-range leases, a gone parent that still
 * answers what it held, listings that lag or miss a child for a moment) and admin operations run against
 * live hosts (`admin`: rewind, release, reset), and a broker that drops connections mid-batch, refuses, acknowledges late or never, or applies flow control
 * (`broker`: only with `relay` on).
 */
export const FAULT_SETS = ['lease', 'source', 'hang', 'view', 'host', 'sink', 'twin', 'clock', 'late', 'bootstrap', 'poison', 'topology', 'admin', 'broker'] as const;
export type FaultSet = (typeof FAULT_SETS)[number];

/** One simulation run; everything else is derived from `seed`. */
export interface SimConfig {
  readonly seed: number;
  readonly faults: readonly FaultSet[];
  /** Fewest and most hosts at once (2 to 6). */
  readonly hosts: { readonly min: number; readonly max: number };
  /** Virtual time with faults and writes, in ms. Default 30 000. */
  readonly chaosMs?: number;
  /**
   * What a host does when its pipeline errors: `'retry'` (default) re-subscribes with RxJS `retry`, as the
   * `materializeToView` docs advise; `'restart'` stops the processor and starts a new one under the same name,
   * as a process supervisor would.
   */
  readonly onError?: 'retry' | 'restart';
  /** What the hosts balance: lease counts (default) or the partitions' change rates. */
  readonly balanceBy?: 'count' | 'load';
  /** The view's guard: by LSN per row (`'guarded'`, default) or each change applied once (`'exactlyOnce'`). */
  readonly view?: ViewMode;
  /**
   * Also materialize a second, `exactlyOnce` view keyed by a group of documents, so that several partitions
   * (and a split's parent and children) write one key. Default false.
   */
  readonly groups?: boolean;
  /**
   * How the hosts process: the Rx form (`'rx'`, default: `changes$` → `materializeToView` → `checkpointEvery`)
   * or the handler form (`'handler'`: `processChanges` with a handler that writes the view itself).
   */
  readonly form?: 'rx' | 'handler';
  /** What happens to a change user code fails on, after retries: dead-lettered (default) or its partition halts. */
  readonly policy?: 'deadLetter' | 'halt';
  /**
   * Where a partition without a checkpoint starts: `'beginning'` (default), `'now'`, `'time'` (a Date between
   * the writes made before the processor started and its start) or `'function'` (per partition, one of those).
   * With any but `'beginning'`, writes are made before the first host starts: those need not be delivered;
   * every change written after it must be.
   */
  readonly start?: 'beginning' | 'now' | 'time' | 'function';
  /** How lease documents are named: rxfeed's layout (default) or the .NET processor's (`'dotnet'`). */
  readonly leaseScheme?: 'rxfeed' | 'dotnet';
  /** How the source's positions look: `mem:<lsn>` (default) or opaque continuation documents (`'opaque'`). */
  readonly positions?: 'lsn' | 'opaque';
  /**
   * Relay every batch to a broker model through the real `publishToJetStream` or `publishToAmqp` (Rx form
   * only; after the views, before `checkpointEvery`), or not (`'off'`, default). See `relay.ts`.
   */
  readonly relay?: 'jetstream' | 'amqp' | 'off';
  /**
   * Pass every batch through a hub of `rxfeed/sse` per host incarnation (Rx form only; after the views), with
   * simulated browsers that connect, lag and resume, or not (`'off'`, default). See `sse.ts`.
   */
  readonly sse?: 'on' | 'off';
  /**
   * What the hosts read and keep leases in: `MemorySource` and `MemoryLeaseStore` (`'memory'`, default), or
   * `CosmosSource` and `CosmosLeaseStore` through the real `@azure/cosmos` client against the emulator in this
   * process (`'sdk'`, see `sdkWorld.ts`), faults striking at the emulator's fault layer.
   */
  readonly source?: 'memory' | 'sdk';
  /**
   * SDK mode only: the most SDK iterators each process's `CosmosSource` keeps (`limitIteratorCache`), a count
   * of at least 1, or `'default'` (its own bound, which no run reaches). Not given (default): drawn per process,
   * half of them 1–3 (see `SdkWorld.connect`).
   */
  readonly iterators?: number | 'default';
}

/** What a product variant sets: the options of {@link SimConfig} that `--faults all` draws per seed. */
export type Variant = Pick<SimConfig, 'view' | 'groups' | 'balanceBy' | 'form' | 'policy' | 'start' | 'leaseScheme' | 'positions' | 'relay' | 'source' | 'sse'>;

const STARTS = ['beginning', 'now', 'time', 'function'] as const;

/**
 * The product variant of a seed under `--faults all`, drawn from a PRNG of its own: view mode, group keys,
 * balancing. Replay lines print each option, so a replay needs no drawing.
 */
export function drawVariant(seed: number): Required<Variant> {
  const random = seededRandom((seed ^ hashString('variant')) >>> 0);
  const variant = {
    view: random() < 0.5 ? 'guarded' : 'exactlyOnce',
    groups: random() < 0.5,
    balanceBy: random() < 0.25 ? 'load' : 'count',
    form: random() < 0.5 ? 'rx' : 'handler',
    policy: random() < 0.7 ? 'deadLetter' : 'halt',
    start: STARTS[Math.floor(random() * STARTS.length)]!,
    leaseScheme: random() < 0.25 ? 'dotnet' : 'rxfeed',
    // Drawn last: the draws above stay what they were before this option existed.
    positions: random() < 0.5 ? 'opaque' : 'lsn',
    // The SDK path costs about 6 times the CPU of the memory mode: drawn rarely.
    source: random() < 0.03 ? 'sdk' : 'memory',
  } as const;
  // Drawn from a PRNG of its own (the one `sim.randomFor('relay')` gives), so the draws above stay as they were.
  const relay = seededRandom((seed ^ hashString('relay')) >>> 0)();
  // The same for the SSE hub (`sim.randomFor('sse')` gives this PRNG; its first draw decides).
  const sse = seededRandom((seed ^ hashString('sse')) >>> 0)();
  return {
    ...variant,
    // The SDK mode reads Cosmos DB's own continuations: no opaque positions (see {@link sdkLimits}).
    positions: variant.source === 'sdk' ? 'lsn' : variant.positions,
    relay: variant.form === 'handler' ? 'off' : relay < 1 / 3 ? 'jetstream' : relay < 2 / 3 ? 'amqp' : 'off',
    sse: variant.form === 'handler' ? 'off' : sse < 0.5 ? 'on' : 'off',
  };
}

/**
 * Fault sets the SDK mode (`source: 'sdk'`) does not run: `admin` (the operator's lease store and source
 * would be SDK clients of their own, whose requests the emulator's fault layer cannot tell from the hosts':
 * the operator must act without faults).
 */
export const SDK_EXCLUDED_FAULTS: readonly FaultSet[] = ['admin'];

/**
 * The config as the SDK mode runs it (other configs are returned as they are): the fault sets of
 * {@link SDK_EXCLUDED_FAULTS} left out, and positions `'lsn'` (`CosmosSource` gives Cosmos DB's own
 * continuations; the `--positions opaque` wrapper is for `MemorySource`). The rest of what the SDK mode leaves
 * out is the world's and the hosts' to enforce: under `topology`, no merges (`World.merge`) and no listings
 * that lag (`Hosts`); under `late`, no lease reads that lag (`ObservedStores`). See the README's "SDK mode".
 */
export function sdkLimits(config: SimConfig): SimConfig {
  if (config.source !== 'sdk') return config;
  const faults = config.faults.filter((f) => !SDK_EXCLUDED_FAULTS.includes(f));
  return { ...config, faults, ...(config.positions === 'opaque' ? { positions: 'lsn' as const } : {}) };
}

/** An invariant that did not hold. */
export interface Violation {
  readonly invariant: string;
  readonly atMs: number;
  readonly detail: string;
}

/** What a run did and found. */
export interface SimResult {
  readonly config: SimConfig;
  readonly violations: readonly Violation[];
  readonly stats: {
    readonly mode: FeedMode;
    readonly partitions: number;
    readonly writes: number;
    readonly deliveries: number;
    readonly virtualMs: number;
    readonly actions: number;
    readonly faults: Readonly<Record<string, number>>;
  };
}

/** Timings shared by every host (virtual ms). */
export const TIMINGS = {
  leaseExpirationMs: 1_000,
  leaseRenewIntervalMs: 300,
  leaseAcquireIntervalMs: 200,
  pollIntervalMs: 50,
  drainTimeoutMs: 500,
} as const;

/** An owned lease with no read of its partition for this long (virtual ms) is owned-but-unread. */
export const UNREAD_BOUND_MS = 20_000;
/** Longest a `late` view write may take to land (virtual ms): quiescence waits for such a write before judging credit. */
export const LATE_WRITE_MS = 8_000;
/** Most virtual time quiescence may take before what is missing counts as lost. */
export const QUIESCE_MS = 120_000;
/** Times a lease may be taken while everything settles after the faults stopped before that counts as churn. */
export const CHURN_MOVES = 4;
/** Most virtual time a graceful stop may take (drain + the coordinator's final-checkpoint margin + slack). */
export const STOP_BOUND_MS = 15_000;
/** Virtual time of the simulation's start (ms since the epoch). */
export const EPOCH_MS = 1_700_000_000_000;
/** Lease prefix of every simulated processor (rxfeed's scheme). */
export const PREFIX = 'sim.';
/** Lease prefix under `leaseScheme: 'dotnet'` (what `dotnetLeasePrefix` would give: no trailing dot). */
export const DOTNET_PREFIX = 'simhost_sim_rid';

/** The lease prefix and lease document id of a lease token under a config's scheme. */
export function leaseNaming(config: SimConfig): { readonly prefix: string; readonly id: (token: string) => string } {
  if (config.leaseScheme === 'dotnet') return { prefix: DOTNET_PREFIX, id: (token) => `${DOTNET_PREFIX}..${token}` };
  return { prefix: PREFIX, id: (token) => PREFIX + token };
}
/** Step of the chaos script and of the invariants checked throughout (virtual ms). */
export const TICK_MS = 100;

/** The one-line command that replays `config` exactly. */
export function replayLine(config: SimConfig): string {
  const chaos = config.chaosMs !== undefined ? ` --chaos-ms ${config.chaosMs}` : '';
  const onError = config.onError === 'restart' ? ' --on-error restart' : '';
  const balance = config.balanceBy !== undefined ? ` --balance ${config.balanceBy}` : '';
  const view = config.view !== undefined ? ` --view ${config.view}` : '';
  const groups = config.groups !== undefined ? ` --groups ${config.groups ? 'on' : 'off'}` : '';
  const form = config.form !== undefined ? ` --form ${config.form}` : '';
  const policy = config.policy !== undefined ? ` --policy ${config.policy}` : '';
  const start = config.start !== undefined ? ` --start ${config.start}` : '';
  const scheme = config.leaseScheme !== undefined ? ` --lease-scheme ${config.leaseScheme}` : '';
  const positions = config.positions !== undefined ? ` --positions ${config.positions}` : '';
  const source = config.source !== undefined ? ` --source ${config.source}` : '';
  const relay = config.relay !== undefined ? ` --relay ${config.relay}` : '';
  const sse = config.sse !== undefined ? ` --sse ${config.sse}` : '';
  const iterators = config.iterators !== undefined ? ` --iterators ${config.iterators}` : '';
  return `npm run sim -- --seed ${config.seed} --faults ${config.faults.join(',') || 'none'} --hosts ${config.hosts.min}-${config.hosts.max}${chaos}${onError}${balance}${view}${groups}${form}${policy}${start}${scheme}${positions}${relay}${source}${sse}${iterators}`;
}
