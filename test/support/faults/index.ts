export { HostClock, type HostClockOptions, type HostState, settle, VirtualClock } from './clock.js';
export { faultyLeaseStore, type LeaseFaultKind, type LeaseFaultPlan } from './faultyLeaseStore.js';
export { faultySource, type SourceFaultKind, type SourceFaultPlan } from './faultySource.js';
export { faultyStep, type StepFaultKind, type StepFaultPlan } from './faultyStep.js';
export { faultyViewStore, type ViewFaultKind, type ViewFaultPlan } from './faultyViewStore.js';
export { gateLeaseStore, gateSource, gateViewStore } from './gate.js';
export { abortReason, FaultEnv, type FaultPlan, type FaultRule, hang, type InjectedFault } from './plan.js';
export { type DeadLetterFaultKind, type DeadLetterFaultPlan, faultyDeadLetterSink, gateDeadLetterSink } from './faultyDeadLetterSink.js';
export { laggingLeaseStore } from './laggingLeaseStore.js';
