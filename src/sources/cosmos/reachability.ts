import { lookup } from 'node:dns/promises';
import type { Container } from '@azure/cosmos';
import { TransientError } from '../../errors/index.js';

/** `getaddrinfo` failures that mean "this host name does not resolve" (now). */
const UNRESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'ENODATA']);

/**
 * `host:port` of an account endpoint (`https://shop.documents.azure.com` → `shop.documents.azure.com:443`),
 * or `undefined` when it is not a URL.
 *
 * @internal
 */
export function hostPortOf(endpoint: string | undefined): string | undefined {
  if (!endpoint) return undefined;
  try {
    const url = new URL(endpoint);
    return `${url.hostname}:${url.port || (url.protocol === 'http:' ? '80' : '443')}`;
  } catch {
    return undefined;
  }
}

/**
 * The endpoint the container's client was made with. `@azure/cosmos` 4.x keeps the client's options at
 * `client.clientContext.cosmosClientOptions`; another layout gives `undefined` (and no early check).
 *
 * @internal
 */
export function endpointOf(container: Container): string | undefined {
  const client = (container as { database?: { client?: unknown } }).database?.client as
    | { clientContext?: { cosmosClientOptions?: { endpoint?: unknown } } }
    | undefined;
  const endpoint = client?.clientContext?.cosmosClientOptions?.endpoint;
  return typeof endpoint === 'string' ? endpoint : undefined;
}

/**
 * Resolves when the endpoint's host name resolves; rejects at once with a {@link TransientError} naming
 * `host:port` when it does not. The SDK retries an unresolvable host for about two minutes before it reports
 * anything: this check says so within the time of one DNS lookup.
 *
 * @example
 * ```ts
 * await checkHostResolves('https://shop.documents.azure.com', 'dbs/shop/colls/orders');
 * ```
 * @internal
 */
export async function checkHostResolves(endpoint: string, what: string): Promise<void> {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return; // not a URL: the SDK reports that itself, at once
  }
  try {
    await lookup(url.hostname);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string' || !UNRESOLVED.has(code)) return;
    throw new TransientError(
      `${what}: cannot reach ${hostPortOf(endpoint)}: the host name does not resolve (${code}); ` +
        'check the account endpoint (a typo, a deleted account, or no DNS on this network)',
      { cause: error },
    );
  }
}

/**
 * Checks an account's host name before the SDK is asked: once, and again after every network failure. A
 * name that does not resolve is reported at once instead of after the SDK's retries; the call after that
 * goes to the SDK all the same (its own HTTP agent or proxy may reach a host this one cannot resolve).
 *
 * @internal
 */
export class HostCheck {
  readonly #endpoint: string | undefined;
  readonly #what: string;
  #checked = false;
  #checking: Promise<void> | undefined;

  constructor(endpoint: string | undefined, what: string) {
    this.#endpoint = endpoint;
    this.#what = what;
    this.#checked = endpoint === undefined;
  }

  /** True when the next request needs no check (the name was looked up, and no network failure came since). */
  get resolved(): boolean {
    return this.#checked;
  }

  /** `host:port` of the endpoint, for messages. */
  get hostPort(): string | undefined {
    return hostPortOf(this.#endpoint);
  }

  /** Resolves at once once checked; otherwise looks the name up (one lookup for concurrent callers). */
  check(): Promise<void> {
    if (this.#checked) return Promise.resolve();
    this.#checking ??= checkHostResolves(this.#endpoint!, this.#what).finally(() => {
      this.#checked = true;
      this.#checking = undefined;
    });
    return this.#checking;
  }

  /** A request failed on the network: look the name up again before the next one. */
  networkFailed(): void {
    if (this.#endpoint !== undefined) this.#checked = false;
  }
}
