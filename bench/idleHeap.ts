/**
 * What an idle lease holds: heap snapshots (after a GC) of bench/idleOverhead.ts's engine (`CosmosSource` over
 * iterators answering "not modified" at once, an in-memory lease store, `checkpointEvery`) before the feed is
 * subscribed and once it owns `BENCH_RANGES` leases and polls them at `BENCH_POLL_MS`, and the objects the second
 * has that the first has not (V8 keeps an object's id across snapshots of one process), per lease:
 * - by constructor (count and self bytes);
 * - by owner: each new object is charged to the nearest object of a class of its own (not a built-in: a
 *   `LeaseTracker`, an `Ownership`, an rxjs `Subscriber`, …) on its shortest path from the GC roots, and to the
 *   field it hangs from (`LeaseTracker.#stall`), with what the bytes are (`Map`, `(closure)`, `system / Context`).
 *
 * Run: npx tsx bench/idleHeap.ts   (env: BENCH_RANGES=1024 BENCH_POLL_MS=5000 BENCH_SETTLE_MS=12000 BENCH_START=beginning|now;
 * BENCH_BUILD=dir loads `dir/esm/index.js` instead of this build, e.g. a copy of `dist` made before a change;
 * BENCH_SNAPSHOT=path keeps the snapshots as path.before/after.heapsnapshot; BENCH_TOP=40 rows per table; BENCH_ANALYZE=path
 * reads path.before/after.heapsnapshot instead of running; BENCH_PATHS=owner.field prints dominator chains of a few of its
 * objects; BENCH_HEAP_ONLY=1: the heap used only, no snapshots)
 */
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString, writeHeapSnapshot } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { idleFeedOptions, idleRanges } from './idleContainer.js';
import type * as Rxfeed from '../src/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

type Package = Pick<typeof Rxfeed, 'CosmosSource' | 'MemoryLeaseStore' | 'checkpointEvery' | 'createChangeFeed'>;
const BUILD = process.env.BENCH_BUILD;
const rxfeed = (BUILD ? await import(pathToFileURL(`${BUILD}/esm/index.js`).href) : await import('./built.js')) as Package;

const RANGES = Number(process.env.BENCH_RANGES ?? 1024);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 5000);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 12_000);
const TOP = Number(process.env.BENCH_TOP ?? 40);
const KEEP = process.env.BENCH_SNAPSHOT;
/** Only the heap used after GC, no snapshots (for many leases). */
const HEAP_ONLY = process.env.BENCH_HEAP_ONLY === '1';
const PATHS = process.env.BENCH_PATHS;
/** `beginning`: each lease's first read moves it (one batch, which checkpointEvery then watches); `now`: pinned by the bootstrap, as bench/idle.ts's, no batch ever. */
const START = (process.env.BENCH_START ?? 'beginning') as 'beginning' | 'now';

const { container: fakeContainer } = idleRanges(RANGES);

function snapshot(name: string): string {
  gc();
  gc();
  if (HEAP_ONLY) return '';
  const path = KEEP ? `${KEEP}.${name}.heapsnapshot` : join(tmpdir(), `idleHeap-${process.pid}.${name}.heapsnapshot`);
  writeHeapSnapshot(path);
  return path;
}

// ---- the run -----------------------------------------------------------------------------------------------

async function run(): Promise<{ beforePath: string; afterPath: string; heapBefore: number; heapAfter: number }> {
const { CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed } = rxfeed;
let owned = 0;
const feed = createChangeFeed<unknown>({
  source: new CosmosSource<unknown>(fakeContainer()),
  leases: new MemoryLeaseStore(),
  ...idleFeedOptions(POLL_MS, () => owned++),
});
await delay(100);
const beforePath = snapshot('before');
const heapBefore = process.memoryUsage().heapUsed;
const subscription = feed.changes$.pipe(checkpointEvery(100)).subscribe();
while (owned < RANGES) await delay(50);
await delay(SETTLE_MS);
const afterPath = snapshot('after');
const heapAfter = process.memoryUsage().heapUsed;
subscription.unsubscribe();
await feed.stop();
return { beforePath, afterPath, heapBefore, heapAfter };
}

// ---- the snapshots -----------------------------------------------------------------------------------------

interface Graph {
  readonly types: string[];
  readonly edgeTypes: string[];
  readonly strings: string[];
  readonly nodeFields: number;
  readonly edgeFields: number;
  readonly nodes: Uint32Array;
  readonly edges: Uint32Array;
  /** First edge index (into `edges`, in fields) of each node. */
  readonly firstEdge: Uint32Array;
  readonly count: number;
  readonly f: Record<string, number>;
  readonly e: Record<string, number>;
}

function load(path: string): Graph {
  const json = JSON.parse(readFileSync(path, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
    nodes: number[];
    edges: number[];
    strings: string[];
  };
  const meta = json.snapshot.meta;
  const f = Object.fromEntries(meta.node_fields.map((n, i) => [n, i]));
  const e = Object.fromEntries(meta.edge_fields.map((n, i) => [n, i]));
  const nodeFields = meta.node_fields.length;
  const edgeFields = meta.edge_fields.length;
  const nodes = Uint32Array.from(json.nodes);
  const edges = Uint32Array.from(json.edges);
  const count = nodes.length / nodeFields;
  const firstEdge = new Uint32Array(count + 1);
  let at = 0;
  for (let n = 0; n < count; n++) {
    firstEdge[n] = at;
    at += nodes[n * nodeFields + f.edge_count!]! * edgeFields;
  }
  firstEdge[count] = at;
  return { types: meta.node_types[0], edgeTypes: meta.edge_types[0], strings: json.strings, nodeFields, edgeFields, nodes, edges, firstEdge, count, f, e };
}

const ids = (g: Graph): Set<number> => {
  const out = new Set<number>();
  for (let n = 0; n < g.count; n++) out.add(g.nodes[n * g.nodeFields + g.f.id!]!);
  return out;
};

/** Objects of these constructors (and every non-object node) are not owners: they are what owners hold. */
const BUILTIN = new Set([
  'Object', 'Array', 'Map', 'Set', 'WeakMap', 'WeakSet', 'WeakRef', 'Promise', 'Error', 'DOMException', 'Date', 'RegExp',
  'AbortController', 'AbortSignal', 'EventTarget', 'Listener', 'Generator', 'AsyncGenerator', 'Timeout', 'TimersList',
  'Function', 'Arguments', 'Symbol', 'ArrayBuffer', 'Uint8Array', 'Buffer', 'FinalizationRegistry', 'SafeMap', 'SafeSet',
  'SafeWeakMap', 'SafeWeakSet', 'SafeWeakRef', 'SafeFinalizationRegistry', 'PromiseReaction', 'Window', 'global',
]);

function report(g: Graph, fresh: (id: number) => boolean, leases: number): void {
  const { nodes, edges, strings, nodeFields: NF, edgeFields: EF, f, e } = g;
  const typeOf = (n: number) => g.types[nodes[n * NF + f.type!]!]!;
  const nameOf = (n: number) => strings[nodes[n * NF + f.name!]!]!;
  const sizeOf = (n: number) => nodes[n * NF + f.self_size!]!;
  const weak = g.edgeTypes.indexOf('weak');
  const shortcut = g.edgeTypes.indexOf('shortcut');
  const kind = (n: number): string => {
    const type = typeOf(n);
    if (type === 'object') return nameOf(n);
    if (type === 'closure') return '(closure)';
    if (type === 'string' || type === 'concatenated string' || type === 'sliced string') return '(string)';
    if (type === 'code') return '(code)';
    if (type === 'array') return `(array) ${nameOf(n)}`.trim();
    if (type === 'hidden' || type === 'object shape') return `system / ${nameOf(n).replace(/^system \/ /, '')}`;
    return `(${type})`;
  };
  // The dominator tree (strong edges only; Cooper, Harvey and Kennedy's iteration over a reverse postorder):
  // an object is charged to its immediate dominator's owner, not to one path of many.
  const strong = (i: number) => {
    const type = edges[i + e.type!]!;
    return type !== weak && type !== shortcut;
  };
  const post = new Int32Array(g.count).fill(-1);
  const order: number[] = [];
  {
    const stack = [0];
    const next = new Uint32Array(g.count);
    const seen = new Uint8Array(g.count);
    seen[0] = 1;
    for (let n = 0; n < g.count; n++) next[n] = g.firstEdge[n]!;
    while (stack.length > 0) {
      const n = stack[stack.length - 1]!;
      let pushed = false;
      while (next[n]! < g.firstEdge[n + 1]!) {
        const i = next[n]!;
        next[n] = i + EF;
        if (!strong(i)) continue;
        const to = edges[i + e.to_node!]! / NF;
        if (seen[to]) continue;
        seen[to] = 1;
        stack.push(to);
        pushed = true;
        break;
      }
      if (!pushed) {
        stack.pop();
        post[n] = order.length;
        order.push(n);
      }
    }
  }
  const preds: number[][] = Array.from({ length: g.count }, () => []);
  for (let n = 0; n < g.count; n++) {
    if (post[n] === -1) continue;
    for (let i = g.firstEdge[n]!; i < g.firstEdge[n + 1]!; i += EF) if (strong(i)) preds[edges[i + e.to_node!]! / NF]!.push(n);
  }
  const parent = new Int32Array(g.count).fill(-1);
  parent[0] = 0;
  const intersect = (a: number, b: number) => {
    while (a !== b) {
      while (post[a]! < post[b]!) a = parent[a]!;
      while (post[b]! < post[a]!) b = parent[b]!;
    }
    return a;
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = order.length - 2; k >= 0; k--) {
      const n = order[k]!;
      let idom = -1;
      for (const p of preds[n]!) if (parent[p] !== -1) idom = idom === -1 ? p : intersect(p, idom);
      if (idom !== parent[n]) {
        parent[n] = idom;
        changed = true;
      }
    }
  }
  // The edge from a node's dominator to it, when there is one (its field name); -1 when it is held only further down.
  const via = new Int32Array(g.count).fill(-1);
  for (let n = 0; n < g.count; n++) {
    if (post[n] === -1) continue;
    for (let i = g.firstEdge[n]!; i < g.firstEdge[n + 1]!; i += EF) {
      const to = edges[i + e.to_node!]! / NF;
      if (strong(i) && parent[to] === n && via[to] === -1) via[to] = i;
    }
  }
  const edgeName = (i: number): string => {
    if (i === -1) return '~';
    const type = g.edgeTypes[edges[i + e.type!]!];
    const name = edges[i + e.name_or_index!]!;
    return type === 'element' || type === 'hidden' ? `[${name}]` : strings[name]!;
  };
  const isOwner = (n: number) =>
    (typeOf(n) === 'object' && !BUILTIN.has(nameOf(n)) && !nameOf(n).startsWith('system') && nameOf(n) !== '') || (typeOf(n) === 'closure' && nameOf(n) !== '') || nameOf(n) === 'Generator';
  const functionOf = (n: number): string => {
    for (let i = g.firstEdge[n]!; i < g.firstEdge[n + 1]!; i += EF) if (edgeName(i) === 'function') return nameOf(edges[i + e.to_node!]! / NF) || '(anonymous)';
    return '?';
  };
  const ownerName = (n: number) => (typeOf(n) === 'closure' ? `${nameOf(n)}()` : nameOf(n) === 'Generator' ? `async ${functionOf(n)}()` : nameOf(n));
  const byKind = new Map<string, { count: number; bytes: number }>();
  const byOwner = new Map<string, { bytes: number; what: Map<string, number> }>();
  let total = 0;
  let unreached = 0;
  const samples = new Map<string, number>();
  for (let n = 0; n < g.count; n++) {
    if (!fresh(nodes[n * NF + f.id!]!)) continue;
    const size = sizeOf(n);
    total += size;
    const k = kind(n);
    const row = byKind.get(k) ?? { count: 0, bytes: 0 };
    row.count++;
    row.bytes += size;
    byKind.set(k, row);
    if (parent[n] === -1) {
      unreached += size;
      continue;
    }
    // The nearest owner up the path, and the field of it the path leaves by.
    let at = n;
    let field = '';
    let owner = '(no owner)';
    for (let hops = 0; hops < 64 && at !== 0; hops++) {
      const up = parent[at]!;
      if (isOwner(up)) {
        owner = ownerName(up);
        field = edgeName(via[at]!);
        break;
      }
      at = up;
    }
    if (isOwner(n) && owner === '(no owner)') owner = ownerName(n);
    const key = field ? `${owner}.${field}` : owner;
    if (key === PATHS && (process.env.BENCH_PATHKIND === undefined || k === process.env.BENCH_PATHKIND) && (samples.get(key) ?? 0) < Number(process.env.BENCH_SAMPLES ?? 6) && size > 0) {
      samples.set(key, (samples.get(key) ?? 0) + 1);
      const hops: string[] = [];
      for (let x = n; x !== 0 && hops.length < 24; x = parent[x]!) hops.push(`${kind(x)}${typeOf(x) === 'closure' ? ` ${nameOf(x)}` : ''}${typeOf(x) === 'hidden' || typeOf(x) === 'array' ? `:${nameOf(x)}` : ''} <-${edgeName(via[x]!)}-`);
      console.log(`path of a ${kind(n)} (${size} B): ${hops.join(' ')}`);
    }
    const o = byOwner.get(key) ?? { bytes: 0, what: new Map<string, number>() };
    o.bytes += size;
    o.what.set(k, (o.what.get(k) ?? 0) + size);
    byOwner.set(key, o);
  }
  const per = (x: number) => (x / leases).toFixed(x / leases < 10 ? 2 : 0);
  console.log(`new objects: ${(total / 2 ** 20).toFixed(1)} MB, ${per(total)} bytes per lease (${(unreached / 2 ** 20).toFixed(2)} MB not reached by strong edges)`);
  console.log(`\nby constructor (per lease: count, bytes):`);
  for (const [k, r] of [...byKind].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, TOP)) {
    console.log(`  ${per(r.count).padStart(7)} ${per(r.bytes).padStart(7)} B  ${k}`);
  }
  console.log(`\nby owner.field (per lease bytes; what they are):`);
  for (const [k, r] of [...byOwner].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, TOP)) {
    const what = [...r.what].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([w, b]) => `${w} ${per(b)}`).join(', ');
    console.log(`  ${per(r.bytes).padStart(7)} B  ${k}: ${what}`);
  }
}

const ANALYZE = process.env.BENCH_ANALYZE;
const { beforePath, afterPath, heapBefore, heapAfter } = ANALYZE
  ? { beforePath: `${ANALYZE}.before.heapsnapshot`, afterPath: `${ANALYZE}.after.heapsnapshot`, heapBefore: NaN, heapAfter: NaN }
  : await run();
if (HEAP_ONLY) {
  console.log(`${RANGES} idle leases from ${START}, poll ${POLL_MS} ms, ${BUILD ?? 'this build'}: heap used after GC ${(heapBefore / 2 ** 20).toFixed(1)} → ${(heapAfter / 2 ** 20).toFixed(1)} MB (${((heapAfter - heapBefore) / RANGES).toFixed(0)} bytes per lease)`);
  process.exit(0);
}
const before = ids(load(beforePath));
const after = load(afterPath);
console.log(
  `${RANGES} idle leases from ${START}, poll ${POLL_MS} ms, ${BUILD ?? 'this build'}: heap used after GC ${(heapBefore / 2 ** 20).toFixed(1)} → ${(heapAfter / 2 ** 20).toFixed(1)} MB ` +
    `(${((heapAfter - heapBefore) / RANGES).toFixed(0)} bytes per lease)`,
);
report(after, (id) => !before.has(id), RANGES);
if (!KEEP && !ANALYZE) {
  rmSync(beforePath);
  rmSync(afterPath);
}
