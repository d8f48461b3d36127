import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Guards the layout: the top-level folders of src/ import each other without a cycle (type imports included),
// and each entry point exports at run time exactly the reviewed names (a new export is a decision: add it here).

const src = fileURLToPath(new URL('../../src/', import.meta.url));

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

/** The top-level folder of a file under src/ (`undefined` for a file at the root, like src/index.ts). */
function folderOf(file: string): string | undefined {
  const parts = relative(src, file).split(/[\\/]/);
  return parts.length > 1 ? parts[0] : undefined;
}

/** Relative module specifiers of `import … from`, `export … from`, `import '…'` and `import('…')`. */
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;

/** Folder → the folders it imports, each with one file that does it (for the message). */
function folderGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of sources(src)) {
    const from = folderOf(file);
    if (from === undefined) continue;
    const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
    for (const [, specifier] of text.matchAll(SPECIFIER)) {
      const to = folderOf(resolve(dirname(file), specifier!));
      if (to === undefined || to === from) continue;
      const edges = graph.get(from) ?? graph.set(from, new Map()).get(from)!;
      if (!edges.has(to)) edges.set(to, relative(src, file));
    }
  }
  return graph;
}

/** The cycles of `graph`, each as the path that closes it (`a → b → a`). */
function cycles(graph: Map<string, Map<string, string>>): string[] {
  const found: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const walk = (node: string, path: string[]) => {
    state.set(node, 'open');
    for (const next of graph.get(node)?.keys() ?? []) {
      if (state.get(next) === 'open') {
        const loop = [...path.slice(path.indexOf(next)), node, next];
        found.push(loop.map((f, i) => (i < loop.length - 1 ? `${f} (${graph.get(f)?.get(loop[i + 1]!)})` : f)).join(' → '));
      } else if (!state.has(next)) walk(next, [...path, node]);
    }
    state.set(node, 'done');
  };
  for (const node of graph.keys()) if (!state.has(node)) walk(node, []);
  return found;
}

describe('source layout', () => {
  it('has no import cycle between the top-level folders of src/', () => {
    const graph = folderGraph();
    expect(graph.size).toBeGreaterThan(10); // the parser sees the imports
    expect(cycles(graph)).toEqual([]);
  });

  it('finds a cycle when there is one (the check bites)', () => {
    const graph = new Map([
      ['deadletter', new Map([['sinks', 'deadletter/PostgresDeadLetterStore.ts']])],
      ['sinks', new Map([['deadletter', 'sinks/materializeToView.ts']])],
    ]);
    expect(cycles(graph)).toEqual(['deadletter (deadletter/PostgresDeadLetterStore.ts) → sinks (sinks/materializeToView.ts) → deadletter']);
  });
});

/** The reviewed runtime exports of each entry point (types are checked by the API reports in api/). */
const REVIEWED: Record<string, readonly string[]> = {
  rxfeed: [
    'ChangeBatch', 'CorruptLeaseError', 'CosmosDeadLetterStore', 'CosmosLeaseStore', 'CosmosSource', 'CredentialsError',
    'DeadLetterFencedError', 'HandlerError', 'InvalidOptionsError', 'LeaseConflictError', 'LeaseInUseError', 'LeaseLostError',
    'MemoryDeadLetterStore', 'MemoryLeaseStore', 'MemorySource', 'MemoryViewStore', 'PartitionGoneError', 'ResourceGoneError',
    'RxfeedError', 'SinkError', 'TransientError', 'UNKNOWN_LAG', 'ViewFencedError', 'alignLeasesWithView', 'asBatches',
    'callbackDeadLetterSink', 'changeFeed', 'changeFeedIterable', 'checkpointEvery', 'classifyFailure', 'createChangeFeed',
    'dotnetLeasePrefix', 'eachBatch', 'eachChange', 'estimateLag', 'fencingError', 'filterChanges', 'flattenChanges',
    'healthHandler', 'inBatchContext', 'lag$', 'latestPerDocument', 'listLeases', 'mapChanges', 'mapDocuments',
    'materializeToView', 'partitionFeeds', 'processChanges', 'redriveDeadLetters', 'releaseLeases', 'resetLeases',
    'rewindLeases', 'stopOnSignals', 'syncToIndex',
  ],
  'rxfeed/postgres': ['PGliteDeadLetterStore', 'PGliteViewStore', 'PostgresDeadLetterStore', 'PostgresSearchIndex', 'PostgresViewStore'],
  'rxfeed/metrics': ['prometheusMetrics'],
  'rxfeed/leases': ['LEASE_DEFAULTS', 'LOAD_PROPERTY', 'createLeaseCoordinator', 'isLeaseExpired', 'planBalance', 'planLoadBalance', 'publishedLoad'],
  'rxfeed/emulator': ['CosmosEmulator', 'EMULATOR_KEY', 'effectivePartitionKey', 'faults', 'startEmulator'],
  'rxfeed/sse': ['SseClient', 'createSseHub', 'lastEventIdOf', 'sseHandler'],
  'rxfeed/sse/client': ['LiveView'],
  'rxfeed/redis': ['RedisViewStore'],
  'rxfeed/nats': ['RelayError', 'RelayStats', 'publishToJetStream'],
  'rxfeed/amqp': ['RelayError', 'RelayStats', 'publishToAmqp'],
};

/** Each entry point's source, as package.json's exports map it (dist/esm/<path>.js ← src/<path>.ts). */
function entrySources(): Record<string, string> {
  const manifest = JSON.parse(readFileSync(join(src, '..', 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  const entries: Record<string, string> = {};
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    const esm = (target as { import?: { default?: string } }).import?.default;
    if (!esm) continue;
    entries[subpath === '.' ? 'rxfeed' : `rxfeed/${subpath.slice(2)}`] = join(src, esm.replace(/^\.\/dist\/esm\//, '').replace(/\.js$/, '.ts'));
  }
  return entries;
}

describe('entry points', () => {
  it('are each a folder barrel (src/<entry>/index.ts), the main one src/index.ts', () => {
    const files = Object.values(entrySources()).map((file) => relative(src, file).replaceAll('\\', '/'));
    expect(files.sort()).toEqual(Object.keys(REVIEWED).map((e) => (e === 'rxfeed' ? 'index.ts' : `${e.slice('rxfeed/'.length)}/index.ts`)).sort());
  });

  it.each(Object.entries(entrySources()))('%s exports at run time exactly its reviewed names', async (entry, file) => {
    const names = Object.keys((await import(file)) as object).sort();
    expect(names).toEqual([...REVIEWED[entry]!].sort());
  });
});
