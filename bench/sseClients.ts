/**
 * @summary Child process of bench/sse.ts: opens `SSE_CLIENTS` event streams to `SSE_URL` with node:http and
 * records, per change event, the latency from the write (the document's `writtenAt`, in epoch ms from
 * `performance.timeOrigin + performance.now()`) to its arrival. With `SSE_STALL=1` it opens the streams and
 * never reads them, like a browser tab that froze. Talks to the parent over IPC.
 */
import { Agent, get, type IncomingMessage } from 'node:http';

const url = process.env.SSE_URL!;
const count = Number(process.env.SSE_CLIENTS ?? '1');
const stall = process.env.SSE_STALL === '1';
const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
const latencies: number[] = [];
let events = 0;
let outOfOrder = 0;
const responses: IncomingMessage[] = [];
const now = () => performance.timeOrigin + performance.now();

function open(): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent }, (res) => {
      responses.push(res);
      if (stall) {
        res.pause();
        resolve();
        return;
      }
      res.setEncoding('utf8');
      let pending = '';
      let lastSeq = -1;
      res.on('data', (chunk: string) => {
        pending += chunk;
        let end: number;
        while ((end = pending.indexOf('\n\n')) >= 0) {
          const block = pending.slice(0, end);
          pending = pending.slice(end + 2);
          const id = /^id: .*\.(\d+)$/m.exec(block);
          const data = /^data: (.*)$/m.exec(block);
          if (!id || !data || block.includes('event: ')) continue;
          const seq = Number(id[1]);
          if (lastSeq >= 0 && seq !== lastSeq + 1) outOfOrder++;
          lastSeq = seq;
          events++;
          const writtenAt = (JSON.parse(data[1]!) as { data?: { writtenAt?: number } }).data?.writtenAt;
          if (writtenAt !== undefined) latencies.push(now() - writtenAt);
        }
      });
      resolve();
    });
    req.on('error', reject);
  });
}

process.on('message', (message: { kind: string }) => {
  if (message.kind === 'report') {
    process.send!({ kind: 'report', latencies, events, outOfOrder, closed: responses.filter((r) => r.complete || r.destroyed).length });
    latencies.length = 0;
    events = 0;
  } else if (message.kind === 'exit') {
    for (const res of responses) res.destroy();
    process.exit(0);
  }
});

for (let i = 0; i < count; i += 100) await Promise.all(Array.from({ length: Math.min(100, count - i) }, open));
process.send!({ kind: 'ready', clients: responses.length });
