/**
 * @summary Child process of bench/sse.ts (the load generator, in its own process): opens `SSE_CLIENTS` event
 * streams to `SSE_URL` with node:http. Live mode records, per change event, the latency from the write (the
 * document's `writtenAt`, in epoch ms from `performance.timeOrigin + performance.now()`) to its arrival; snapshot
 * mode (`SSE_MODE=snapshot`) counts the rows each stream gets up to `up-to-date` and the time it took. With
 * `SSE_STALL=1` it opens the streams and never reads them, like a browser tab that froze. Talks to the parent over IPC.
 */
import { Agent, get, type IncomingMessage } from 'node:http';

const url = process.env.SSE_URL!;
const count = Number(process.env.SSE_CLIENTS ?? '1');
const stall = process.env.SSE_STALL === '1';
const snapshot = process.env.SSE_MODE === 'snapshot';
const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
const latencies: number[] = [];
let events = 0;
let duplicates = 0;
let dropped = 0;
const responses: IncomingMessage[] = [];
const now = () => performance.timeOrigin + performance.now();
/** Snapshot mode: per stream, rows received and ms from the request to `up-to-date`. */
const snapshots: { rows: number; ms: number; bytes: number }[] = [];

function open(): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = now();
    const req = get(url, { agent }, (res) => {
      responses.push(res);
      if (stall) {
        res.pause();
        resolve();
        return;
      }
      res.setEncoding('utf8');
      let pending = '';
      let rows = 0;
      let bytes = 0;
      const seen = new Map<string, number>();
      res.on('data', (chunk: string) => {
        pending += chunk;
        bytes += chunk.length;
        let end: number;
        while ((end = pending.indexOf('\n\n')) >= 0) {
          const block = pending.slice(0, end);
          pending = pending.slice(end + 2);
          const type = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (type === 'dropped') dropped++;
          if (data === undefined) continue;
          if (type === 'snapshot') {
            // Count the rows without parsing them all (the child must not be the bottleneck): one `{"id":` each.
            for (let at = data.indexOf('{"id":'); at >= 0; at = data.indexOf('{"id":', at + 6)) rows++;
          }
          else if (type === 'up-to-date') {
            snapshots.push({ rows, ms: now() - started, bytes });
            if (snapshot) res.destroy();
          } else if (type === 'message') {
            const change = JSON.parse(data) as { id: string; lsn: number; data?: { writtenAt?: number } };
            // A change this stream already had (same document, same or older LSN) would be a duplicate.
            if ((seen.get(change.id) ?? -1) >= change.lsn) duplicates++;
            seen.set(change.id, change.lsn);
            events++;
            const writtenAt = change.data?.writtenAt;
            if (writtenAt !== undefined) latencies.push(now() - writtenAt);
          }
        }
      });
      resolve();
    });
    req.on('error', reject);
  });
}

// Never outlive the bench.
process.on('disconnect', () => process.exit(0));
process.on('message', (message: { kind: string }) => {
  if (message.kind === 'report') {
    process.send!({ kind: 'report', latencies, events, duplicates, dropped, snapshots, closed: responses.filter((r) => r.complete || r.destroyed).length });
    latencies.length = 0;
    events = 0;
  } else if (message.kind === 'exit') {
    for (const res of responses) res.destroy();
    process.exit(0);
  }
});

// Open in waves of 100, so the server's accept queue never overflows.
for (let i = 0; i < count; i += 100) await Promise.all(Array.from({ length: Math.min(100, count - i) }, open));
process.send!({ kind: 'ready', clients: responses.length });
