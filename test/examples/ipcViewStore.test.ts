import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { IpcViewStore, serveViewStore } from '../../examples/demo/IpcViewStore.js';
import { MemoryViewStore, ViewFencedError, type ViewWrite } from '../../src/index.js';

/** Two ends of a fake IPC channel that serialize like Node's default ('json') IPC serialization. */
function channelPair() {
  const a = new EventEmitter();
  const b = new EventEmitter();
  let open = true;
  const sender = (to: EventEmitter) => (message: unknown, callback?: (error: Error | null) => void) => {
    if (!open) {
      callback?.(new Error('Channel closed'));
      return false;
    }
    const copy: unknown = JSON.parse(JSON.stringify(message));
    setImmediate(() => to.emit('message', copy));
    callback?.(null);
    return true;
  };
  return {
    worker: Object.assign(a, { send: sender(b) }),
    parent: Object.assign(b, { send: sender(a) }),
    close: () => {
      open = false;
    },
  };
}

const write = (key: string, total: number, lsn: number, epoch = 1): ViewWrite<{ total: number }> => ({
  mode: 'guarded',
  changes: [{ key, row: { total }, lsn, timestampMs: 1_000 + lsn, partition: '0' }],
  partitions: [{ partition: '0', epoch, position: `p${lsn}`, lsn }],
});

describe('IpcViewStore', () => {
  it('proxies every ViewStore call to the parent store and returns its results', async () => {
    const { worker, parent } = channelPair();
    const store = new MemoryViewStore<{ total: number }>();
    const written: number[] = [];
    serveViewStore(parent, 'orders', store, { onWrite: (w) => written.push(w.changes.length) });
    const view = new IpcViewStore<{ total: number }>({ channel: 'orders', endpoint: worker });

    expect(await view.write(write('o1', 5, 3))).toEqual({ written: 1, deleted: 0, skipped: 0 });
    expect(await view.write(write('o1', 4, 2))).toEqual({ written: 0, deleted: 0, skipped: 1 }); // older: guarded
    expect(written).toEqual([1, 1]);
    expect((await view.get('o1'))?.row).toEqual({ total: 5 });
    expect(await view.get('missing')).toBeUndefined();
    expect((await view.rows()).map((r) => r.key)).toEqual(['o1']);
    const positions = await view.positions();
    expect(positions).toBeInstanceOf(Map);
    expect(positions.get('0')).toMatchObject({ position: 'p3', epoch: 1, lsn: 3 });
    await view.clearPositions();
    expect((await store.positions()).size).toBe(0);
    expect(await view.pruneTombstones(Date.now())).toBe(0);
    await view.close();
  });

  it('rebuilds a fenced write as a ViewFencedError in the worker, and ignores other channels', async () => {
    const { worker, parent } = channelPair();
    const store = new MemoryViewStore<{ total: number }>();
    serveViewStore(parent, 'orders', store);
    serveViewStore(parent, 'other', new MemoryViewStore<{ total: number }>());
    const view = new IpcViewStore<{ total: number }>({ channel: 'orders', endpoint: worker });
    await view.write(write('o1', 5, 3, 2));
    const error = await view.write(write('o1', 6, 4, 1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ViewFencedError);
    expect(error).toMatchObject({ leaseToken: '0', epoch: 1, currentEpoch: 2 });
    expect((await store.get('o1'))?.row).toEqual({ total: 5 });
  });

  it('rejects calls when the parent cannot be reached or the store was closed', async () => {
    const { worker, close } = channelPair();
    const view = new IpcViewStore<{ total: number }>({ channel: 'orders', endpoint: worker });
    close();
    await expect(view.rows()).rejects.toThrow(/cannot reach the parent/);
    await view.close();
    await expect(view.rows()).rejects.toThrow(/is closed/);
  });

  it('needs an IPC channel', () => {
    expect(() => new IpcViewStore({ channel: 'orders', endpoint: new EventEmitter() })).toThrow(/no IPC channel/);
  });
});
