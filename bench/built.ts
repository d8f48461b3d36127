/**
 * rxfeed as its users run it: the built package (`dist/esm`), built from the current sources when a
 * benchmark starts. Run from the sources under tsx, every function and closure rxfeed creates also goes
 * through esbuild's keepNames helper (`__name`, a property definition per closure): about 5 MB more heap at
 * 1,024 idle partitions and some CPU on every read, which the published package does not have. Benchmarks
 * that compare rxfeed with hand-written SDK code (itself compiled once, its few closures made once) import
 * it from here.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type * as Rxfeed from '../src/index.js';

// A bench's child process (RXFEED_BENCH_BUILT=1) loads what its parent built.
if (process.env['RXFEED_BENCH_BUILT'] !== '1') execFileSync(process.execPath, [fileURLToPath(new URL('../scripts/build.mjs', import.meta.url))], { stdio: 'ignore' });
const rxfeed = (await import(new URL('../dist/esm/index.js', import.meta.url).href)) as typeof Rxfeed;

export const { createChangeFeed, CosmosLeaseStore, MemoryLeaseStore, MemorySource, ChangeBatch, CosmosSource, checkpointEvery, mapChanges, filterChanges, eachBatch } = rxfeed;
