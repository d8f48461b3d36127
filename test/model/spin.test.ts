import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * Checks model/leases.pml (the lease protocol of docs/lease-protocol.md) exhaustively with spin: the protocol
 * as it is now has no counterexample, and each protocol bug fixed earlier, put back with its `-DBUG_*`
 * switch, has one. Needs `spin` and `gcc`: skipped with a reason without them, required under CI=true.
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
  readonly seconds: number;
  /** Steps in the counterexample trail, when there is one. */
  readonly trailSteps: number | undefined;
  readonly output: string;
}

function run(cwd: string, command: string, args: string[]): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
  if (result.error) throw result.error;
  const output = `${result.stdout}${result.stderr}`;
  if (command !== './pan' && result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed:\n${output}`);
  return output;
}

/** Generates, compiles and runs the verifier for the model with `defines`, in a directory of its own. */
function check(name: string, defines: string[]): Verdict {
  const dir = join(work, name);
  run(work, 'mkdir', ['-p', dir]);
  copyFileSync(MODEL, join(dir, 'leases.pml'));
  run(dir, 'spin', ['-a', ...defines.map((d) => `-D${d}`), 'leases.pml']);
  run(dir, 'gcc', ['-O2', '-w', '-DSAFETY', '-o', 'pan', 'pan.c']);
  const output = run(dir, './pan', ['-m200000']);
  const errors = Number(/errors: (\d+)/.exec(output)?.[1] ?? NaN);
  const states = Number(/(\d+) states, stored/.exec(output)?.[1] ?? NaN);
  const seconds = Number(/elapsed time ([\d.e+]+) seconds/.exec(output)?.[1] ?? NaN);
  let trailSteps: number | undefined;
  if (errors > 0) {
    const trail = readFileSync(join(dir, 'leases.pml.trail'), 'utf8');
    trailSteps = trail.split('\n').filter((line) => /^-?\d+:/.test(line)).length;
    const violated = /pan:\d+: (.*)/.exec(output)?.[1] ?? '';
    console.log(`${name}: counterexample of ${trailSteps} steps (${violated}); trail in ${dir}/leases.pml.trail (replay: spin -t -p ${defines.map((d) => `-D${d} `).join('')}leases.pml)`);
  }
  console.log(`${name}: ${states} states stored, ${errors} errors, ${seconds} s`);
  return { errors, states, seconds, trailSteps, output };
}

const SCOPE = ['ONE_LEASE'];

describe.skipIf(missing.length > 0)('the lease protocol model (spin)', () => {
  it('has no counterexample: one lineage split once, two hosts, crash and stop, drift, epochs up to 3', () => {
    const verdict = check('protocol', SCOPE);
    expect(verdict.output).toContain('Full statespace search');
    expect(verdict.errors, verdict.output).toBe(0);
    expect(verdict.states).toBeGreaterThan(1000);
  }, 120_000);

  const bugs: ReadonlyArray<readonly [string, string]> = [
    ['BUG_SKEWED_EXPIRY', "expiry judged from the writer's timestamp against this host's clock: two owners"],
    ['BUG_REQUESTER_CLOCK', "the handoff deadline counted from the requester's clock: two owners"],
    ['BUG_CHILD_EPOCH', "a split child not above its parent's epoch: the view fences the child's rightful owner"],
    ['BUG_STOP_LEAVES_HANDED', 'stop() leaving a lease handed to it owned: nobody reads it until it expires'],
  ];
  for (const [bug, what] of bugs) {
    it(`finds a counterexample with ${bug} (${what})`, () => {
      const verdict = check(bug, [...SCOPE, bug]);
      expect(verdict.errors, verdict.output).toBeGreaterThan(0);
      expect(verdict.trailSteps).toBeGreaterThan(0);
    }, 120_000);
  }
});
