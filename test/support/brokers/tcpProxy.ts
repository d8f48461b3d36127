import { createServer, type Server, Socket } from 'node:net';

/**
 * A TCP proxy in front of a real service, to break real connections: `cut()` destroys every open
 * connection (a connection dropped mid-batch), `refuse()` makes new ones fail until `accept()`, `stall()`
 * holds every byte from the service back (a slow ack) until `flow()`.
 */
export class TcpProxy {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #refusing = false;
  #stalled = false;
  /** How many connections were cut so far. */
  cuts = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server);
    server.on('connection', (client) => proxy.#accept(client, target));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** The proxy's port on 127.0.0.1. */
  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  #accept(client: Socket, target: { host: string; port: number }): void {
    if (this.#refusing) {
      client.destroy();
      return;
    }
    const upstream = new Socket();
    const pair: [Socket, Socket] = [client, upstream];
    this.#pairs.add(pair);
    const close = () => {
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.on('data', (data) => upstream.write(data));
    upstream.on('data', (data) => {
      if (this.#stalled) upstream.pause();
      client.write(data);
    });
    if (this.#stalled) upstream.pause();
    upstream.connect(target.port, target.host);
  }

  /** Drops every open connection (both sides see a reset). */
  cut(): void {
    for (const [client, upstream] of this.#pairs) {
      client.resetAndDestroy();
      upstream.destroy();
      this.cuts++;
    }
    this.#pairs.clear();
  }

  refuse(): void {
    this.#refusing = true;
  }

  accept(): void {
    this.#refusing = false;
  }

  /** Holds replies back (requests still reach the service), as a slow or blocked broker would. */
  stall(): void {
    this.#stalled = true;
    for (const [, upstream] of this.#pairs) upstream.pause();
  }

  flow(): void {
    this.#stalled = false;
    for (const [, upstream] of this.#pairs) upstream.resume();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
