import { describe, expect, it } from 'vitest';
import type { Partition } from '../../../src/core/Partition.js';
import type { Page, ReadRequest, Source } from '../../../src/sources/Source.js';
import { forwardSource } from './forwardSource.js';
import { faultySource } from './faultySource.js';
import { gateSource } from './gate.js';
import { HostClock, VirtualClock } from './clock.js';
import { FaultEnv } from './plan.js';
import { withOpaquePositions } from './sourceShapes.js';

const partition: Partition = { id: '0', range: { minInclusive: '', maxExclusive: 'FF' } };

/** A source with every optional member, recording the calls it gets. */
function fullSource(calls: string[]): Source<unknown> & { description: string } {
  return {
    description: 'full',
    destination: { system: 'test', name: 'c1' },
    mode: 'latestVersion',
    listPartitions: async () => (calls.push('listPartitions'), [partition]),
    read: async (_request: ReadRequest): Promise<Page<unknown>> => (calls.push('read'), { changes: [], position: 'mem:0' }),
    checkStart: () => void calls.push('checkStart'),
    positionAt: async () => (calls.push('positionAt'), 'mem:0'),
    currentTime: async () => (calls.push('currentTime'), new Date(5)),
    checkReachable: async () => void calls.push('checkReachable'),
  };
}

describe('forwardSource', () => {
  it('forwards every member the inner source has, optional ones included, and reads properties live', async () => {
    const calls: string[] = [];
    const inner = fullSource(calls);
    const wrapped = forwardSource(inner);
    expect(wrapped.mode).toBe('latestVersion');
    expect(wrapped.destination).toEqual({ system: 'test', name: 'c1' });
    inner.description = 'renamed';
    expect(wrapped.description).toBe('renamed');
    await wrapped.listPartitions();
    await wrapped.read({ partition, from: 'beginning', maxItemCount: 1 });
    wrapped.checkStart!('beginning');
    await wrapped.positionAt!(partition, 'now');
    expect(await wrapped.currentTime!()).toEqual(new Date(5));
    await wrapped.checkReachable!();
    expect(calls).toEqual(['listPartitions', 'read', 'checkStart', 'positionAt', 'currentTime', 'checkReachable']);
  });

  it('leaves out the optional members the inner source lacks, even where an override is given', () => {
    const inner: Source<unknown> = { description: 'bare', mode: 'latestVersion', listPartitions: async () => [], read: async () => ({ changes: [], position: 'mem:0' }) };
    const wrapped = forwardSource(inner, { currentTime: (currentTime) => currentTime });
    expect('currentTime' in wrapped).toBe(false);
    expect('positionAt' in wrapped).toBe(false);
    expect('destination' in wrapped).toBe(false);
  });

  it('puts an override in place of the method, handing it the inner one', async () => {
    const calls: string[] = [];
    const wrapped = forwardSource(fullSource(calls), { currentTime: (currentTime) => async (signal) => new Date((await currentTime(signal))!.getTime() + 1) });
    expect(await wrapped.currentTime!()).toEqual(new Date(6));
    expect(calls).toEqual(['currentTime']);
  });

  it('is what the fault wrappers are made of: none of them loses a member of the source it wraps', () => {
    const clock = new VirtualClock();
    const env = new FaultEnv({ seed: 1, scheduler: clock });
    const inner = fullSource([]);
    const wrappers = [faultySource(inner, {}, env), gateSource(inner, new HostClock(clock)), withOpaquePositions(inner)];
    for (const wrapped of wrappers) {
      for (const key of ['description', 'destination', 'mode', 'listPartitions', 'read', 'checkStart', 'positionAt', 'currentTime', 'checkReachable']) {
        expect(key in wrapped, key).toBe(true);
      }
    }
  });
});
