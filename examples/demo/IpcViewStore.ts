/**
 * @summary A ViewStore that lives in another process: workers call it over the Node child-process IPC
 * channel, the parent answers from its real store (PGlite is embedded and single-process, so only the
 * parent can hold it).
 *
 * The worker keeps `materializeToView` + `checkpointEvery` semantics: `write()` resolves only after the
 * parent's transaction committed, so a checkpoint never moves past work that is not in the view. Errors
 * come back with their kind, so a fenced write is still a `ViewFencedError` (a `LeaseLostError`) in the worker.
 */
import type { ChildProcess } from 'node:child_process';
import { ViewFencedError } from 'rxfeed';
import type { ViewPartitionState, ViewRow, ViewStore, ViewWrite, ViewWriteResult } from 'rxfeed';

/** The ViewStore methods that travel over IPC (`close` stays local: the parent owns the store). */
type Method = 'write' | 'get' | 'rows' | 'positions' | 'pruneTombstones' | 'clearPositions';
const METHODS: readonly Method[] = ['write', 'get', 'rows', 'positions', 'pruneTombstones', 'clearPositions'];

/** A call from a worker. `channel` lets several stores share one IPC channel. */
export interface ViewRequest {
  readonly kind: 'view-request';
  readonly channel: string;
  readonly id: number;
  readonly method: Method;
  readonly args: unknown[];
}

interface SerializedError {
  readonly name: string;
  readonly message: string;
  readonly partition?: string;
  readonly epoch?: number;
  readonly currentEpoch?: number;
}

/** The parent's answer: a result, or the error the real store threw. */
export interface ViewResponse {
  readonly kind: 'view-response';
  readonly channel: string;
  readonly id: number;
  readonly result?: unknown;
  readonly error?: SerializedError;
}

/** What the parent needs from a process to talk to it: Node's `process` in a worker, a `ChildProcess` in the parent. */
interface IpcEndpoint {
  send?(message: unknown, callback?: (error: Error | null) => void): boolean;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'message', listener: (message: unknown) => void): unknown;
}

function isRequest(message: unknown, channel: string): message is ViewRequest {
  const m = message as Partial<ViewRequest> | null;
  return typeof m === 'object' && m !== null && m.kind === 'view-request' && m.channel === channel;
}

function isResponse(message: unknown, channel: string): message is ViewResponse {
  const m = message as Partial<ViewResponse> | null;
  return typeof m === 'object' && m !== null && m.kind === 'view-response' && m.channel === channel;
}

// positions() returns a Map, which IPC's JSON serialization would flatten to {}; send it as entries.
const encode = (method: Method, result: unknown): unknown =>
  method === 'positions' ? [...(result as ReadonlyMap<string, ViewPartitionState>)] : result;
const decode = (method: Method, result: unknown): unknown =>
  method === 'positions' ? new Map(result as [string, ViewPartitionState][]) : result;

function serializeError(error: unknown): SerializedError {
  if (error instanceof ViewFencedError) {
    return { name: 'ViewFencedError', message: error.message, partition: error.leaseToken, epoch: error.epoch, currentEpoch: error.currentEpoch };
  }
  const e = error instanceof Error ? error : new Error(String(error));
  return { name: e.name, message: e.message };
}

function deserializeError(error: SerializedError, description: string): Error {
  if (error.name === 'ViewFencedError' && error.partition !== undefined) {
    return new ViewFencedError(error.partition, error.epoch ?? 0, error.currentEpoch ?? 0);
  }
  const e = new Error(`${description}: ${error.message}`);
  e.name = error.name;
  return e;
}

/**
 * The worker side: a {@link ViewStore} whose calls run in the parent process.
 *
 * @example
 * ```ts
 * // in a process started with an IPC channel (fork, or spawn with stdio 'ipc')
 * const view = new IpcViewStore<OrderSummary>({ channel: 'order_summary' });
 * feed.changes$.pipe(materializeToView(view, { project }), checkpointEvery({ count: 500, ms: 500 })).subscribe();
 * ```
 */
export class IpcViewStore<R> implements ViewStore<R> {
  readonly description: string;
  readonly #channel: string;
  readonly #endpoint: IpcEndpoint;
  readonly #pending = new Map<number, { method: Method; resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  readonly #listener = (message: unknown): void => this.#onMessage(message);
  #nextId = 0;
  #closed = false;

  /**
   * @param options.channel - name shared with the parent's {@link serveViewStore}. Required.
   * @param options.endpoint - the IPC endpoint. Default `process` (needs an IPC channel to the parent).
   */
  constructor(options: { channel: string; endpoint?: IpcEndpoint }) {
    const endpoint = options.endpoint ?? (process as unknown as IpcEndpoint);
    if (typeof options.channel !== 'string' || options.channel === '') throw new TypeError('IpcViewStore: give a non-empty channel name');
    if (typeof endpoint.send !== 'function') {
      throw new TypeError('IpcViewStore: this process has no IPC channel; start it with fork() or spawn(..., { stdio: [..., "ipc"] })');
    }
    this.#channel = options.channel;
    this.#endpoint = endpoint;
    this.description = `view ${options.channel} over IPC`;
    endpoint.on('message', this.#listener);
  }

  write(write: ViewWrite<R>): Promise<ViewWriteResult> {
    return this.#call('write', [write]) as Promise<ViewWriteResult>;
  }

  get(key: string): Promise<ViewRow<R> | undefined> {
    return this.#call('get', [key]) as Promise<ViewRow<R> | undefined>;
  }

  rows(): Promise<ViewRow<R>[]> {
    return this.#call('rows', []) as Promise<ViewRow<R>[]>;
  }

  positions(): Promise<ReadonlyMap<string, ViewPartitionState>> {
    return this.#call('positions', []) as Promise<ReadonlyMap<string, ViewPartitionState>>;
  }

  pruneTombstones(beforeTimestampMs: number): Promise<number> {
    return this.#call('pruneTombstones', [beforeTimestampMs]) as Promise<number>;
  }

  clearPositions(): Promise<void> {
    return this.#call('clearPositions', []) as Promise<void>;
  }

  /** Stops listening; calls still waiting are rejected. The parent's store stays open (the parent owns it). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#endpoint.off('message', this.#listener);
    for (const call of this.#pending.values()) call.reject(new Error(`${this.description} was closed`));
    this.#pending.clear();
  }

  #call(method: Method, args: unknown[]): Promise<unknown> {
    if (this.#closed) return Promise.reject(new Error(`${this.description} is closed`));
    const id = ++this.#nextId;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { method, resolve, reject });
      const request: ViewRequest = { kind: 'view-request', channel: this.#channel, id, method, args };
      this.#endpoint.send!(request, (error) => {
        if (!error) return;
        this.#pending.delete(id);
        reject(new Error(`${this.description}: cannot reach the parent (${error.message})`));
      });
    });
  }

  #onMessage(message: unknown): void {
    if (!isResponse(message, this.#channel)) return;
    const call = this.#pending.get(message.id);
    if (!call) return;
    this.#pending.delete(message.id);
    if (message.error) call.reject(deserializeError(message.error, this.description));
    else call.resolve(decode(call.method, message.result));
  }
}

/**
 * The parent side: answers a child's {@link IpcViewStore} calls from `store`. A call whose child died before
 * the answer still completes in the store (like a crash between write and checkpoint); the answer is dropped.
 *
 * @example
 * ```ts
 * const view = await PGliteViewStore.create<OrderSummary>({ table: 'order_summary' });
 * const child = spawn(process.execPath, ['--import', 'tsx', 'worker.ts'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
 * const stopServing = serveViewStore(child, 'order_summary', view, { onWrite: (w) => console.log(w.changes.length) });
 * ```
 * @param options.onWrite - called after each committed write (e.g. to count processed changes).
 * @returns a function that stops answering.
 */
export function serveViewStore<R>(
  child: ChildProcess | IpcEndpoint,
  channel: string,
  store: ViewStore<R>,
  options: { onWrite?: (write: ViewWrite<R>, result: ViewWriteResult) => void } = {},
): () => void {
  const endpoint = child as IpcEndpoint;
  const reply = (response: ViewResponse): void => {
    // The child may be gone (killed mid-call): nothing is waiting for this answer any more.
    try {
      endpoint.send?.(response, () => undefined);
    } catch {
      /* channel closed */
    }
  };
  const listener = (message: unknown): void => {
    if (!isRequest(message, channel)) return;
    const { id, method, args } = message;
    if (!METHODS.includes(method)) {
      reply({ kind: 'view-response', channel, id, error: { name: 'TypeError', message: `unknown view method ${String(method)}` } });
      return;
    }
    const run = (store[method] as (...a: unknown[]) => Promise<unknown>).apply(store, args);
    run.then(
      (result) => {
        if (method === 'write') options.onWrite?.(args[0] as ViewWrite<R>, result as ViewWriteResult);
        reply({ kind: 'view-response', channel, id, result: encode(method, result) });
      },
      (error: unknown) => reply({ kind: 'view-response', channel, id, error: serializeError(error) }),
    );
  };
  endpoint.on('message', listener);
  return () => endpoint.off('message', listener);
}
