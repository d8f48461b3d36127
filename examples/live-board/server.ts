/**
 * @summary `npm run example:live-board`: a live order board in the browser, fed by Server-Sent Events from one
 * change feed read. The embedded Cosmos DB emulator holds the orders, a writer moves them along, the feed keeps a
 * view of the open orders, and every browser that opens the page gets that view, then each change after it —
 * resuming without gap or duplicate after a dropped connection or a server restart.
 *
 * Run: `npm run example:live-board` and open the printed URL; flags: `--port 3000 --rate 4 --ranges 2`.
 */
import { CosmosClient, type Container } from '@azure/cosmos';
import { transform } from 'esbuild';
import { readFile } from 'node:fs/promises';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Subscription } from 'rxjs';
import { checkpointEvery, createChangeFeed, CosmosSource, materializeToView, MemoryLeaseStore, MemoryViewStore, type Change, type ChangeFeedProcessor } from '../../src/index.js';
import { CosmosEmulator } from '../../src/emulator/index.js';
import { createSseHub, sseHandler, type SseHub } from '../../src/sse/index.js';
import { OrderWriter, toCard, type Order, type OrderCard } from './orders.js';

/** Settings of {@link startLiveBoard}. */
export interface LiveBoardOptions {
  /** Port of the web page; 0 picks a free one (kept across {@link LiveBoard.restartServer}). Default 3000. */
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
  /** The open orders as the feed materialized them: what every page shows. */
  readonly view: MemoryViewStore<OrderCard>;
  /** The hub of the server now running (a new one after each restart). */
  readonly hub: SseHub<Order, OrderCard>;
  /** The writer the board uses (also when `rate` is 0: call `step()` yourself). */
  readonly writer: OrderWriter;
  /** Cuts every open event stream mid-flight (as a flaky network does); browsers reconnect and resume. */
  cutStreams(): number;
  /**
   * Stops the web server, the change feed and its hub, and starts them again on the same port, as a deploy does;
   * the leases and the view stay (in a real deployment: the lease container and the view's database).
   */
  restartServer(): Promise<void>;
  close(): Promise<void>;
}

const PUBLIC = fileURLToPath(new URL('./public/', import.meta.url));
const CLIENT = fileURLToPath(new URL('../../src/sse/client/index.ts', import.meta.url));
const STATIC: Record<string, string> = {
  '/': 'index.html',
  '/index.html': 'index.html',
  '/board.js': 'board.js',
  '/board.css': 'board.css',
};
const TYPES: Record<string, string> = { html: 'text/html', js: 'text/javascript', css: 'text/css' };

/** The row an order is on the board: its card while open; `undefined` (off the board) once delivered or cancelled. */
export const boardRow = (change: Change<Order>): OrderCard | undefined => {
  const order = change.document;
  return order && order.status !== 'delivered' && order.status !== 'cancelled' ? toCard(order) : undefined;
};

/** The browser helper (`rxfeed/sse/client`), served as JavaScript from its source. */
async function clientScript(): Promise<string> {
  const { code } = await transform(await readFile(CLIENT, 'utf8'), { loader: 'ts', format: 'esm', target: 'es2022' });
  return code;
}

/** Starts the emulator, the writer, the change feed with its view and SSE hub, and the web server. */
export async function startLiveBoard(options: LiveBoardOptions = {}): Promise<LiveBoard> {
  const emulator = await CosmosEmulator.start({ initialRangeCount: options.ranges ?? 2 });
  const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
  const { database } = await client.databases.createIfNotExists({ id: 'shop' });
  const { container: orders } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/customer'], version: 2 } });
  const leases = new MemoryLeaseStore();
  const view = new MemoryViewStore<OrderCard>();
  const client$ = clientScript();

  /** One server process: a change feed, its hub (one read of the feed for every browser) and the web server. */
  async function startServer(port: number) {
    // The page gets the view's rows, then each change as the same projection: a card, or nothing once it leaves.
    const hub = createSseHub<Order, OrderCard>({ view, project: boardRow, replayLimit: 2_000, heartbeatMs: options.heartbeatMs ?? 15_000 });
    const feed: ChangeFeedProcessor<Order> = createChangeFeed<Order>({
      source: new CosmosSource<Order>(orders),
      leases,
      instanceName: 'live-board',
      leasePrefix: 'live-board.',
      pollIntervalMs: 100,
    });
    // The view first, then the hub: a change is published once the view holds it, so a snapshot never misses one.
    const subscription: Subscription = feed.changes$
      .pipe(materializeToView(view, { project: boardRow }), hub.broadcast(), checkpointEvery({ count: 100, ms: 1_000 }))
      .subscribe({ error: (error: unknown) => console.error('live-board: the change feed failed:', error) });
    const events = sseHandler(hub);
    const streams = new Set<ServerResponse>();
    const server: Server = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://localhost').pathname;
      if (path === '/events') {
        streams.add(res);
        res.once('close', () => streams.delete(res));
        events(req, res);
      } else if (path === '/stats') {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }).end(JSON.stringify(hub.stats()));
      } else if (path === '/client.js') {
        client$.then(
          (code) => res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8' }).end(code),
          () => res.writeHead(500).end(),
        );
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
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return {
      hub,
      port: (server.address() as AddressInfo).port,
      cutStreams: () => {
        const n = streams.size;
        for (const res of streams) res.socket?.destroy();
        return n;
      },
      stop: async () => {
        hub.close();
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => server.close(resolve));
        subscription.unsubscribe();
        await feed.stop();
      },
    };
  }

  let running = await startServer(options.port ?? 3000);
  const url = `http://127.0.0.1:${running.port}/`;

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
    view,
    get hub() {
      return running.hub;
    },
    writer,
    cutStreams: () => running.cutStreams(),
    restartServer: async () => {
      const { port } = running;
      await running.stop();
      running = await startServer(port);
    },
    close: async () => {
      clearInterval(writing);
      await running.stop();
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
