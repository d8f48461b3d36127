import type { Outcome, RawRequest, RequestHandler } from './server.js';

/** The abort signal of an {@link EmulatorHttpRequest} (what `@azure/core-rest-pipeline` calls `AbortSignalLike`). */
export interface EmulatorAbortSignal {
  /** Whether the request was aborted. */
  readonly aborted: boolean;
  /** Calls `listener` when the request is aborted. */
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  /** Stops calling `listener`. */
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** What {@link EmulatorHttpClient} reads of a request: the parts of `@azure/core-rest-pipeline`'s `PipelineRequest` it needs. */
export interface EmulatorHttpRequest {
  /** The full URL; only its path and query are served (the host part is not looked up). */
  readonly url: string;
  /** The HTTP method, e.g. `GET`. */
  readonly method: string;
  /** The request headers. */
  readonly headers: {
    /** The headers as a plain object. */
    toJSON(options?: { preserveCase?: boolean }): Record<string, string>;
  };
  /** A string or bytes (what `@azure/cosmos` sends); other body types are refused. */
  readonly body?: unknown;
  /** Aborts the request (the SDK's request timeout): a request held by a `hang` fault then fails with an `AbortError`. */
  readonly abortSignal?: EmulatorAbortSignal;
}

/** Response headers, shaped as `@azure/core-rest-pipeline`'s `HttpHeaders` (names in lower case). */
export interface EmulatorHttpHeaders extends Iterable<[string, string]> {
  /** One header's value, by name in any case. */
  get(name: string): string | undefined;
  /** Whether a header is present. */
  has(name: string): boolean;
  /** Sets a header. */
  set(name: string, value: string | number | boolean): void;
  /** Removes a header. */
  delete(name: string): void;
  /** The headers as a plain object, names in lower case. */
  toJSON(options?: { preserveCase?: boolean }): Record<string, string>;
}

/** An answer of {@link EmulatorHttpClient}, shaped as `@azure/core-rest-pipeline`'s `PipelineResponse`. */
export interface EmulatorHttpResponse<R extends EmulatorHttpRequest = EmulatorHttpRequest> {
  /** The request answered. */
  request: R;
  /** The HTTP status. */
  status: number;
  /** The response headers (`etag`, `x-ms-request-charge`, `x-ms-session-token`…). */
  headers: EmulatorHttpHeaders;
  /** The JSON body as text (`''` when there is none). */
  bodyAsText: string;
}

/**
 * An HTTP client (the `httpClient` option of `@azure/cosmos`'s `CosmosClient`) that hands each request to
 * an emulator in this process: no socket, no port, the same protocol, faults and request log. A `hang`
 * fault answers only when the request is aborted (the SDK's request timeout); `reset` and `lostReply`
 * fail the request as a dropped connection does (`ECONNRESET`).
 *
 * @example
 * ```ts
 * const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key, httpClient: emulator.httpClient() });
 * ```
 */
export interface EmulatorHttpClient {
  /** Serves one request; rejects as a dropped connection (`code: 'ECONNRESET'`) or an aborted request (`AbortError`). */
  sendRequest<R extends EmulatorHttpRequest>(request: R): Promise<EmulatorHttpResponse<R>>;
}

class Headers implements EmulatorHttpHeaders {
  readonly #map = new Map<string, string>();

  constructor(raw: Record<string, string>) {
    for (const [k, v] of Object.entries(raw)) this.#map.set(k.toLowerCase(), v);
  }

  get(name: string): string | undefined {
    return this.#map.get(name.toLowerCase());
  }

  has(name: string): boolean {
    return this.#map.has(name.toLowerCase());
  }

  set(name: string, value: string | number | boolean): void {
    this.#map.set(name.toLowerCase(), String(value));
  }

  delete(name: string): void {
    this.#map.delete(name.toLowerCase());
  }

  toJSON(): Record<string, string> {
    return Object.fromEntries(this.#map);
  }

  [Symbol.iterator](): Iterator<[string, string]> {
    return this.#map.entries();
  }
}

/** The error a dropped connection gives (as `@azure/core-rest-pipeline` reports it: a `RestError` with the socket's code). */
function connectionReset(request: EmulatorHttpRequest): Error {
  return Object.assign(new Error('socket hang up'), { name: 'RestError', code: 'ECONNRESET', request });
}

function abortError(): Error {
  return Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
}

function bodyOf(request: EmulatorHttpRequest): RawRequest['body'] {
  const body = request.body;
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  throw Object.assign(new Error('the in-process emulator client takes string or byte bodies only'), { name: 'RestError' });
}

/**
 * The in-process client over `handler`. `hanging` collects the release of requests a `hang` fault holds,
 * so that stopping the emulator fails them (as a dropped connection).
 *
 * @internal
 */
export function inProcessClient(handler: RequestHandler, hanging: Set<() => void>): EmulatorHttpClient {
  return {
    async sendRequest<R extends EmulatorHttpRequest>(request: R): Promise<EmulatorHttpResponse<R>> {
      const signal = request.abortSignal;
      if (signal?.aborted) throw abortError();
      const url = new URL(request.url);
      const headers = { ...request.headers.toJSON(), host: url.host };
      const outcome: Outcome = await handler.serve({ method: request.method, url: url.pathname + url.search, headers, body: bodyOf(request) });
      if (outcome.kind === 'reset') throw connectionReset(request);
      if (outcome.kind === 'hang') return hang(request, signal, hanging);
      if (signal?.aborted) throw abortError();
      return { request, status: outcome.status, headers: new Headers(outcome.headers), bodyAsText: outcome.text };
    },
  };
}

/** Never answers: rejects with an `AbortError` when `signal` aborts, or as a dropped connection when the emulator stops. */
function hang(request: EmulatorHttpRequest, signal: EmulatorAbortSignal | undefined, hanging: Set<() => void>): Promise<never> {
  return new Promise<never>((_, reject) => {
    const settle = (error: Error): void => {
      hanging.delete(stopped);
      signal?.removeEventListener('abort', aborted);
      reject(error);
    };
    const aborted = (): void => settle(abortError());
    const stopped = (): void => settle(connectionReset(request));
    hanging.add(stopped);
    signal?.addEventListener('abort', aborted, { once: true });
  });
}
