import type { DeadLetterFaultPlan, LeaseFaultPlan, SourceFaultPlan, StepFaultPlan, ViewFaultPlan } from '../support/faults/index.js';
import type { Sim } from './context.js';
import { LATE_WRITE_MS } from './config.js';

/** The fault plan of every seam, drawn for one run from its fault sets. */
export interface FaultPlans {
  readonly source: SourceFaultPlan;
  readonly lease: LeaseFaultPlan;
  readonly view: ViewFaultPlan;
  readonly step: StepFaultPlan;
  readonly deadLetter: DeadLetterFaultPlan;
}

/** Draws the plans (in this order: source, lease, view, step; the draws are part of the seed's replay). */
export function drawFaultPlans({ faults, int }: Sim): FaultPlans {
  const source: SourceFaultPlan = faults.has('source') || faults.has('hang')
    ? {
        read: [
          ...(faults.has('source')
            ? ([
                { kind: 'throttle', probability: 0.9, retryAfterMs: 200 + int(800), during: 'storm' },
                { kind: 'transient', probability: 0.02 },
                { kind: 'throttle', probability: 0.02, retryAfterMs: 100 + int(900) },
                { kind: 'slow', probability: 0.03, ms: 50 + int(1_500) },
              ] as const)
            : []),
          ...(faults.has('hang') ? [{ kind: 'hang' as const, probability: 0.001 }] : []),
        ],
        listPartitions: faults.has('source') ? [{ kind: 'transient', probability: 0.1 }] : [],
        // The source's time, asked when a run starts from 'now': failed, slow or hung first answers must not
        // move the start later (no draw of `int`: the plans of older seeds stay as they were).
        currentTime: [
          ...(faults.has('source')
            ? ([
                { kind: 'transient', probability: 0.2 },
                { kind: 'slow', probability: 0.3, ms: 2_500 },
              ] as const)
            : []),
          ...(faults.has('hang') ? [{ kind: 'hang' as const, probability: 0.1 }] : []),
        ],
      }
    : {};
  const lease: LeaseFaultPlan = withBootstrap(faults.has('bootstrap'), faults.has('lease')
    ? {
        list: [{ kind: 'transient', probability: 0.03 }],
        read: [
          { kind: 'transient', probability: 0.03 },
          { kind: 'slow', probability: 0.03, ms: 50 + int(500) },
        ],
        createIfAbsent: [
          { kind: 'transient', probability: 0.03 },
          { kind: 'lostReply', probability: 0.03 },
        ],
        replace: [
          { kind: 'transient', probability: 0.02 },
          { kind: 'conflict', probability: 0.01 },
          { kind: 'timeout', probability: 0.005, ms: 500 + int(2_500) },
          { kind: 'slow', probability: 0.03, ms: 50 + int(800) },
          { kind: 'lostReply', probability: 0.02 },
        ],
        delete: [
          { kind: 'transient', probability: 0.05 },
          { kind: 'lostReply', probability: 0.03 },
        ],
      }
    : {});
  const view: ViewFaultPlan = {
    write: [
      ...(faults.has('view')
        ? ([
            { kind: 'failure', probability: 0.01 },
            { kind: 'slow', probability: 0.05, ms: 20 + int(1_000) },
            { kind: 'lostReply', probability: 0.01 },
          ] as const)
        : []),
      // A write that lands long after it left (a long transaction, a pool wait): past drains and handovers.
      ...(faults.has('late') ? [{ kind: 'slow' as const, probability: 0.01, ms: 2_000 + int(LATE_WRITE_MS - 2_000) }] : []),
    ],
  };
  const step: StepFaultPlan = faults.has('sink')
    ? {
        next: [
          { kind: 'failure', probability: 0.005 },
          { kind: 'slow', probability: 0.05, ms: 10 + int(400) },
        ],
      }
    : {};
  // The `poison` set: the dead-letter store fails, slows down or loses its reply now and then.
  const deadLetter: DeadLetterFaultPlan = faults.has('poison')
    ? {
        write: [
          { kind: 'failure', probability: 0.1 },
          { kind: 'slow', probability: 0.1, ms: 300 },
          { kind: 'lostReply', probability: 0.05 },
        ],
      }
    : {};
  return { source, lease, view, step, deadLetter };
}

/** Under the `bootstrap` fault set, lease creates are slow (a stop or crash lands while they are in flight). */
function withBootstrap(on: boolean, plan: LeaseFaultPlan): LeaseFaultPlan {
  if (!on) return plan;
  return { ...plan, createIfAbsent: [{ kind: 'slow', probability: 0.5, ms: 300 }, ...(plan.createIfAbsent ?? [])] };
}
