/**
 * The lease tests' virtual time: the simulation's clock (test/support/faults/clock.ts) under the name these
 * tests have always used. One implementation of virtual time for unit tests and the simulation.
 */
export { VirtualClock as VirtualScheduler, settle } from '../support/faults/clock.js';
