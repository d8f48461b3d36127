import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Change } from '../../src/core/Change.js';
import type { FeedRange } from '../../src/core/Partition.js';
import { createSseHub } from '../../src/sse/index.js';
import { FakeResponse } from './fakeResponse.js';

const hubOf = (streamId = 'S', replayLimit = 1000) => createSseHub<{ id: string }>({ streamId, replayLimit, scheduler: new VirtualTimeScheduler() });
const change = (id: string, lsn: number): Change<{ id: string }> => ({ id, operation: 'upsert', document: { id }, lsn, timestampMs: lsn });
const batch = (partition: string, range: FeedRange | undefined, ...changes: Change<{ id: string }>[]) =>
  new ChangeBatch({ partition, range, changes, position: `p${changes.at(-1)?.lsn ?? 0}` });
const ALL = { minInclusive: '', maxExclusive: 'FF' };
const LOW = { minInclusive: '', maxExclusive: '80' };
const HIGH = { minInclusive: '80', maxExclusive: 'FF' };
const sent = (res: FakeResponse) => res.changes().map((c) => `${c.id}@${c.lsn}`);

describe('SseHub: de-duplication along lineage', () => {
  it('split children re-reading from the parent\'s checkpoint send nothing twice; their new changes go out', () => {
    const hub = hubOf();
    const res = new FakeResponse();
    hub.connect(res);
    hub.publish(batch('0', ALL, change('a', 1), change('b', 2), change('c', 3), change('d', 4)));
    hub.publish(batch('1', LOW, change('a', 1), change('c', 3), change('e', 5)));
    hub.publish(batch('2', HIGH, change('b', 2), change('d', 4), change('f', 5)));
    hub.publish(batch('1', LOW, change('e', 5), change('g', 6))); // the child's own re-read
    expect(sent(res)).toEqual(['a@1', 'b@2', 'c@3', 'd@4', 'e@5', 'f@5', 'g@6']);
    expect(res.parser.lastEventId).toBe('S.0:4,1:6,2:5');
  });

  it('a merged range re-reading both parents sends only what neither parent published', () => {
    const hub = hubOf();
    const res = new FakeResponse();
    hub.connect(res);
    hub.publish(batch('1', LOW, change('a', 1), change('c', 3)));
    hub.publish(batch('2', HIGH, change('b', 2), change('d', 4), change('f', 6)));
    // The merged range reads on from the lower parent's mark: f@6 again, and e@5 that parent 1 never got to.
    hub.publish(batch('3', ALL, change('e', 5), change('f', 6), change('h', 7)));
    expect(sent(res)).toEqual(['a@1', 'c@3', 'b@2', 'd@4', 'f@6', 'e@5', 'h@7']);
  });

  it('a resumed client whose id names only the parent gets the children\'s changes after the parent\'s mark', () => {
    const hub = hubOf();
    const first = new FakeResponse();
    hub.connect(first);
    hub.publish(batch('0', ALL, change('a', 1), change('b', 2)));
    first.disconnect();
    hub.publish(batch('1', LOW, change('a', 1), change('c', 3)));
    const again = new FakeResponse();
    hub.connect(again, { lastEventId: first.parser.lastEventId });
    expect(first.parser.lastEventId).toBe('S.0:2');
    expect(sent(again)).toEqual(['c@3']);
  });
});

describe('SseHub: a client\'s own marks with the hub\'s positions', () => {
  it('a merged range re-read sends nothing the client\'s id says it has, once the hub passed part of its marks', () => {
    const old = hubOf('old');
    const before = new FakeResponse();
    old.connect(before);
    old.publish(batch('1', LOW, change('a', 1), change('c', 3), change('d', 4), change('e', 5)));
    old.publish(batch('2', HIGH, change('b', 2)));
    old.close();
    expect(before.parser.lastEventId).toBe('old.1:5,2:2');
    // A new process reads on from its checkpoints (partition 1's is behind what the old one sent).
    const hub = hubOf('new');
    hub.publish(batch('2', HIGH, change('b', 2)));
    hub.publish(batch('1', LOW, change('c', 3)));
    const res = new FakeResponse(before.parser);
    const had = sent(res).length;
    hub.connect(res, { lastEventId: before.parser.lastEventId });
    // Past the client's mark of partition 2: the hub's position holds it now, the client's own mark of 1 still counts.
    hub.publish(batch('2', HIGH, change('g', 6)));
    expect(res.parser.lastEventId).toBe('new.2:6,1:5');
    // The partitions merge; the merged range reads on from the lower parent's checkpoint (after c@3).
    hub.publish(batch('3', ALL, change('d', 4), change('e', 5), change('h', 7)));
    expect(sent(res).slice(had)).toEqual(['g@6', 'h@7']);
    expect(res.parser.lastEventId).toBe('new.2:6,1:5,3:7');
  });
});

describe('SseHub: ids from a previous server process (changes only)', () => {
  it('a new hub replays to an old client once it republished from at or before the client\'s position, and resets it otherwise', () => {
    const before = hubOf('old');
    const res = new FakeResponse();
    before.connect(res);
    before.publish(batch('0', ALL, change('a', 1), change('b', 2), change('c', 3)));
    const id = res.parser.lastEventId;
    before.close();
    const after = hubOf('new');
    // Nothing republished yet for partition 0: the new hub cannot vouch for the gap.
    const early = new FakeResponse();
    after.connect(early, { lastEventId: id });
    expect(JSON.parse(early.events.find((e) => e.type === 'reset')!.data).reason).toBe('unknown-stream');
    // The feed resumes from its checkpoint (after b@2), then goes on.
    after.publish(batch('0', ALL, change('c', 3), change('d', 4)));
    const late = new FakeResponse();
    after.connect(late, { lastEventId: id });
    expect(sent(late)).toEqual(['d@4']);
    // A client that had only a@1 cannot be served: b@2 was never republished.
    const behind = new FakeResponse();
    after.connect(behind, { lastEventId: 'old.0:1' });
    expect(JSON.parse(behind.events.find((e) => e.type === 'reset')!.data).reason).toBe('too-old');
  });
});
