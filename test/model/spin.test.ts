import { execFile, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * Checks model/leases.pml (the lease protocol of docs/lease-protocol.md) exhaustively with spin: the protocol
 * as it is now has no counterexample, safety (assertions) and liveness (an LTL property under bounded faults),
 * and each protocol bug fixed earlier, put back with its `-DBUG_*` switch, has one, breaking the property it
 * names. Needs `spin` and `gcc`: skipped with a reason without them, required under CI=true.
 */

const MODEL = resolve(__dirname, '../../model/leases.pml');
const CI = process.env.CI === 'true';

function has(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0;
}
const missing = ['spin', 'gcc'].filter((c) => !has(c, c === 'spin' ? ['-V'] : ['--version']));
if (missing.length > 0) {
  const reason = `model check skipped: ${missing.join(' and ')} not installed (apt-get install spin gcc)`;
  if (CI) throw new Error(`${reason}; required under CI=true`);
  console.log(reason);
}

const work = missing.length > 0 ? '' : mkdtempSync(join(tmpdir(), 'rxfeed-spin-'));
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

interface Verdict {
  readonly errors: number;
  readonly states: number;
  readonly depth: number;
  readonly seconds: number;
  /** Steps in the counterexample trail, when there is one. */
  readonly trailSteps: number | undefined;
  /** The CHECK bit of the violated assertion (see CHECKS in the model), when an assertion failed. */
  readonly violated: number | undefined;
  readonly output: string;
}

/**
 * Runs a command without blocking the event loop (a long synchronous spawn starves vitest's worker RPC).
 * spin and gcc must succeed; pan reports its verdict in its output whatever its exit status.
 */
function run(cwd: string, command: string, args: string[]): Promise<string> {
  return new Promise((resolveRun, reject) => {
    execFile(command, args, { cwd, encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`;
      if (error && (command !== './pan' || error.killed || typeof error.code !== 'number')) {
        reject(new Error(`${command} ${args.join(' ')} failed: ${error.message}\n${output}`));
      } else resolveRun(output);
    });
  });
}

type Mode = 'safety' | 'liveness';

/**
 * Generates, compiles and runs the verifier for the model with `defines`, in a directory of its own: safety
 * checks the assertions (and invalid end states); liveness checks the model's LTL property `read_all` for
 * acceptance cycles under weak fairness. `large`: the search is expected to store half a million states or more.
 */
async function check(name: string, mode: Mode, defines: readonly string[], large: boolean): Promise<Verdict> {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  copyFileSync(MODEL, join(dir, 'leases.pml'));
  const all = mode === 'liveness' ? ['LIVE', ...defines] : [...defines];
  await run(dir, 'spin', ['-a', ...all.map((d) => `-D${d}`), 'leases.pml']);
  // gcc -O1 takes about 2 s of CPU more than -O0 on pan.c and saves about a third of pan's time: worth it
  // from about half a million states.
  await run(dir, 'gcc', [large ? '-O1' : '-O0', '-w', '-DCOLLAPSE', ...(mode === 'safety' ? ['-DSAFETY'] : []), '-o', 'pan', 'pan.c']);
  const output = await run(dir, './pan', ['-m400000', '-w21', ...(mode === 'liveness' ? ['-a', '-f'] : [])]);
  const errors = Number(/errors: (\d+)/.exec(output)?.[1] ?? NaN);
  const states = Number(/(\d+) states, stored/.exec(output)?.[1] ?? NaN);
  const depth = Number(/depth reached (\d+)/.exec(output)?.[1] ?? NaN);
  const seconds = Number(/elapsed time ([\d.e+]+) seconds/.exec(output)?.[1] ?? NaN);
  const bit = /assertion violated \( !\(\(\d+&(\d+)\)\)/.exec(output)?.[1];
  let trailSteps: number | undefined;
  if (errors > 0) {
    const trail = readFileSync(join(dir, 'leases.pml.trail'), 'utf8');
    trailSteps = trail.split('\n').filter((line) => /^-?\d+:/.test(line)).length;
    const violated = /pan:\d+: (.*)/.exec(output)?.[1] ?? '';
    console.log(`${name}: counterexample of ${trailSteps} steps (${violated}); trail in ${dir}/leases.pml.trail (replay: spin -t -p ${all.map((d) => `-D${d} `).join('')}leases.pml)`);
  }
  console.log(`${name} (${mode}, ${all.join(' ')}): ${states} states stored, depth ${depth}, ${errors} errors, ${seconds} s`);
  return { errors, states, depth, seconds, trailSteps, violated: bit === undefined ? undefined : Number(bit), output };
}

/**
 * The checked scopes (see docs/lease-protocol.md, "The model"). A fault is an ask (a steal), a crash, a stop or
 * a slow host (the clock moving on while a host has a step due); NF bounds them, without NF they are unbounded
 * (epochs bound the run).
 */
const SCOPES: ReadonlyArray<readonly [string, Mode, readonly string[], boolean]> = [
  ['one lineage split once, two hosts, faults unbounded, epochs up to 3', 'safety', ['ONE_LEASE'], false],
  ['one lineage split once, three hosts, up to 4 faults', 'safety', ['ONE_LEASE', 'H=3', 'NF=4'], true],
  ['two lineages (one split once), three hosts, up to 2 faults', 'safety', ['H=3', 'NF=2'], true],
  ['every lease eventually owned and read: two lineages (one split once), two hosts, up to 2 faults', 'liveness', ['NF=2'], true],
  ['every lease eventually owned and read: one lineage split once, three hosts, up to 2 faults', 'liveness', ['ONE_LEASE', 'H=3', 'NF=2'], false],
  ['one lineage split twice (the child splits in turn), late creates, two hosts, up to 3 faults', 'safety', ['ONE_LEASE', 'DEEP', 'NF=3'], true],
];

/** The scope every mutant runs in (some add a fault bound: see each). */
const MUTANT_SCOPE = ['ONE_LEASE'];

describe.skipIf(missing.length > 0)('the lease protocol model (spin)', () => {
  for (const [what, mode, defines, large] of SCOPES) {
    it(`has no counterexample (${mode}): ${what}`, async () => {
      const verdict = await check(`${mode}-${defines.join('-') || 'default'}`, mode, defines, large);
      expect(verdict.output).toContain('Full statespace search');
      expect(verdict.errors, verdict.output).toBe(0);
      expect(verdict.states).toBeGreaterThan(1000);
    }, 120_000);
  }

  // [switch, what it puts back, the property it breaks (the CHECK bit; 0: liveness), more defines, large]
  const bugs: ReadonlyArray<readonly [string, string, number, readonly string[], boolean]> = [
    ['BUG_SKEWED_EXPIRY', "expiry judged from the writer's timestamp against this host's clock: two owners", 1, [], true],
    ['BUG_REQUESTER_CLOCK', "the handoff deadline counted from the requester's clock: two owners", 1, [], true],
    ['BUG_CHILD_EPOCH', "a split child not above its parent's epoch: the view fences the child's rightful owner", 4, [], false],
    ['BUG_STOP_LEAVES_HANDED', 'stop() leaving a lease handed to it owned: nobody reads it until it expires', 16, [], false],
    // With every property checked, another breaks first (the parent taken again checkpoints behind its child);
    // checking the lineage order alone shows the write the fix is about. Two faults are enough.
    ['BUG_PARENT_OUTLIVES', "the split without the replaced mark: the parent, taken again above its child's epoch, writes after the child", 8, ['NF=2', 'CHECKS=8'], false],
    ['BUG_FINISH_BY_MARKER', 'only the host that marked a parent finishes its replacement: after its crash no child is read', 0, ['NF=2'], false],
    // These two need the child's own split and creates landing late (-DDEEP); two faults are enough.
    ['BUG_NO_TOMBSTONE', 'a delete leaving no tombstone: a late create brings the deleted child back below its epoch, beside its own child', 4, ['DEEP', 'NF=2'], false],
    ['BUG_CHILDREN_FROM_LISTING', "a finisher creating the children of its own listing: the child's child beside the child over one range", 4, ['DEEP', 'NF=2'], false],
  ];
  for (const [bug, what, property, more, large] of bugs) {
    it(`finds a counterexample with ${bug} (${what})`, async () => {
      const mode: Mode = property === 0 ? 'liveness' : 'safety';
      const verdict = await check(bug, mode, [...MUTANT_SCOPE, ...more, bug], large);
      expect(verdict.errors, verdict.output).toBeGreaterThan(0);
      expect(verdict.trailSteps).toBeGreaterThan(0);
      if (mode === 'liveness') expect(verdict.output).toContain('acceptance cycle');
      else expect(verdict.violated, verdict.output).toBe(property);
    }, 120_000);
  }
});
