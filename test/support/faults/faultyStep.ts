import { concatMap, from, type MonoTypeOperatorFunction } from 'rxjs';
import { type FaultEnv, type FaultPlan } from './plan.js';

/**
 * Faults of a pipeline step (a sink or operator between the feed and `checkpointEvery`):
 * - `failure`: the stream errors (as a sink whose write failed);
 * - `slow`: the value passes after `ms` (default 1 000), holding its credit meanwhile.
 */
export type StepFaultKind = 'failure' | 'slow';

/** A fault plan of a step: rules for `next`. */
export type StepFaultPlan = FaultPlan<'next', StepFaultKind>;

/**
 * A pipeline step that passes values on, in order, failing or slowing down as `plan` says. Give it the
 * host's scheduler (`env.withScheduler(host)`) so a crashed host's pipeline stops too.
 *
 * @example
 * ```ts
 * feed.changes$.pipe(faultyStep({ next: [{ kind: 'slow', probability: 0.1, ms: 200 }] }, env), checkpointEvery(100));
 * ```
 */
export function faultyStep<V>(plan: StepFaultPlan, env: FaultEnv): MonoTypeOperatorFunction<V> {
  return concatMap((value: V) =>
    from(
      (async () => {
        const rule = env.pick('sink', plan, 'next');
        if (rule?.kind === 'failure') throw new Error('sink step failed (injected)');
        if (rule?.kind === 'slow') await env.delay(rule.ms ?? 1_000);
        return value;
      })(),
    ),
  );
}
