/**
 * @summary `npm run example:live-board`: a live order board in the browser, fed by Server-Sent Events from one
 * change feed read. The embedded Cosmos DB emulator holds the orders, a writer moves them along, and every
 * browser that opens the page sees them change, resuming without gaps after a dropped connection.
 *
 * Run: `npm run example:live-board` and open the printed URL; flags: `--port 3000 --rate 4 --ranges 2`.
 */
import { CosmosClient, type Container } from '@azure/cosmos';
import { readFile } from 'node:fs/promises';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { tap, type Subscription } from 'rxjs';
import { checkpointEvery, createChangeFeed, CosmosSource, MemoryLeaseStore, type ChangeBatch } from '../../src/index.js';
import { CosmosEmulator } from '../../src/emulator/index.js';
import { createSseHub, sseHandler, type SseHub } from '../../src/sse/index.js';
import { OrderWriter, projectCard, toCard, type Order, type OrderCard } from './orders.js';

/** Settings of {@link startLiveBoard}. */
export interface LiveBoardOptions {
  /** Port of the web page; 0 picks a free one. Default 3000. */
  readonly port?: number;
  /** Order writes per second by the built-in writer; 0 writes nothing (tests write their own). Default 4. */
  readonly rate?: number;
  /** Partition key ranges of the orders container. Default 2. */
  readonly ranges?: number;
  /** Heartbeat interval of the event stream, in ms. Default 15 000. */
  readonly heartbeatMs?: number;
}

/** A running live board. */
export interface LiveBoard {
  readonly url: string;
  readonly orders: Container;
  readonly hub: SseHub<Order>;
  /** The writer the board uses (also when `rate` is 0: call `step()` yourself). */
  readonly writer: OrderWriter;
  /** The open orders the server holds, as the snapshot endpoint serves them. */
  snapshot(): { lastEventId: string; orders: Record<string, OrderCard> };
  /** Cuts every open event stream mid-flight (as a flaky network does); browsers reconnect and resume. */
  cutStreams(): number;
  close(): Promise<void>;
}

const PUBLIC = fileURLToPath(new URL('./public/', import.meta.url));
const STATIC: Record<string, string> = {
  '/': 'index.html',
  '/index.html': 'index.html',
  '/board.js': 'board.js',
  '/board.css': 'board.css',
};
const TYPES: Record<string, string> = { html: 'text/html', js: 'text/javascript', css: 'text/css' };

/** Starts the emulator, the writer, the change feed with its SSE hub, and the web server. */
export async function startLiveBoard(options: LiveBoardOptions = {}): Promise<LiveBoard> {
  const emulator = await CosmosEmulator.start({ initialRangeCount: options.ranges ?? 2 });
  const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
  const { database } = await client.databases.createIfNotExists({ id: 'shop' });
  const { container: orders } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/customer'], version: 2 } });

  // One read of the feed for every browser: the hub numbers the changes and multicasts them.
  const hub = createSseHub<Order>({ project: projectCard, replayLimit: 2_000, heartbeatMs: options.heartbeatMs ?? 15_000 });
  // The board as the server knows it, kept in step with the hub so a snapshot matches `hub.lastEventId`.
  const board = new Map<string, OrderCard>();
  const feed = createChangeFeed<Order>({
    source: new CosmosSource<Order>(orders),
    leases: new MemoryLeaseStore(),
    instanceName: 'live-board',
    leasePrefix: 'live-board.',
    pollIntervalMs: 100,
  });
  const applyToBoard = (batch: ChangeBatch<Order>) => {
    for (const change of batch.changes) {
      const order = change.document;
      if (!order || order.status === 'delivered' || order.status === 'cancelled') board.delete(change.id);
      else board.set(change.id, toCard(order));
    }
  };
  const subscription: Subscription = feed.changes$.pipe(tap(applyToBoard), hub.broadcast(), checkpointEvery({ count: 100, ms: 1_000 })).subscribe({
    error: (error: unknown) => console.error('live-board: the change feed failed:', error),
  });

  const events = sseHandler(hub);
  const streams = new Set<ServerResponse>();
  const snapshot = () => ({ lastEventId: hub.lastEventId, orders: Object.fromEntries(board) });
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path === '/events') {
      streams.add(res);
      res.once('close', () => streams.delete(res));
      events(req, res);
    } else if (path === '/snapshot') {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }).end(JSON.stringify(snapshot()));
    } else if (path === '/stats') {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }).end(JSON.stringify(hub.stats()));
    } else if (STATIC[path]) {
      const file = STATIC[path];
      readFile(PUBLIC + file).then(
        (body) => res.writeHead(200, { 'Content-Type': `${TYPES[file.split('.').pop()!]}; charset=utf-8` }).end(body),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    }
  });
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => (sockets.add(socket), socket.once('close', () => sockets.delete(socket))));
  await new Promise<void>((resolve) => server.listen(options.port ?? 3000, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

  const writer = new OrderWriter(orders);
  const rate = options.rate ?? 4;
  let writing: NodeJS.Timeout | undefined;
  if (rate > 0) {
    let busy = false;
    writing = setInterval(() => {
      if (busy) return;
      busy = true;
      writer
        .step()
        .catch((error: unknown) => console.error('live-board: write failed:', (error as Error).message))
        .finally(() => (busy = false));
    }, 1000 / rate);
  }

  return {
    url,
    orders,
    hub,
    writer,
    snapshot,
    cutStreams: () => {
      const n = streams.size;
      for (const res of streams) res.socket?.destroy();
      return n;
    },
    close: async () => {
      clearInterval(writing);
      hub.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
      subscription.unsubscribe();
      await feed.stop();
      await emulator.stop();
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { port: { type: 'string' }, rate: { type: 'string' }, ranges: { type: 'string' } } });
  const number = (flag: string, value: string | undefined, fallback: number) => {
    const n = value === undefined ? fallback : Number(value);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${flag} must be a non-negative integer, got ${JSON.stringify(value)}`);
    return n;
  };
  const board = await startLiveBoard({ port: number('port', values.port, 3000), rate: number('rate', values.rate, 4), ranges: number('ranges', values.ranges, 2) });
  console.log(`live board: open ${board.url}  (Ctrl-C to stop)`);
  const stop = () => void board.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
