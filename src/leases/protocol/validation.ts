// Protocol: checks of the settings every host of a processor must agree on (lease prefix, lease scheme, what
// balancing evens out), with messages that say what to fix. See docs/lease-protocol.md, "Documents".
import { InvalidOptionsError } from '../../errors/index.js';

/** Default prefix of a processor's lease ids. */
export const DEFAULT_LEASE_PREFIX = 'rxfeed.';

/**
 * @internal Checks a lease prefix: non-empty, so one processor never takes another's leases. A processor must
 * name its own (`required`): two apps that both left it out would silently split one set of leases between
 * them. Tools that only read leases (admin, estimator) fall back to `'rxfeed.'`, the default of earlier versions.
 */
export function checkLeasePrefix(name: string, prefix: unknown, required = false): string {
  if (prefix === undefined && required) {
    throw new InvalidOptionsError(
      name,
      "is required: name this processor, e.g. 'orders-view.' (the prefix of its lease ids). Processors sharing a lease " +
        `container need distinct names; leases written by earlier versions without one are under '${DEFAULT_LEASE_PREFIX}'`,
    );
  }
  if (prefix === undefined) return DEFAULT_LEASE_PREFIX;
  if (typeof prefix !== 'string') throw new InvalidOptionsError(name, `must be a string, e.g. 'orders-view.' (got ${typeof prefix})`);
  if (prefix === '') {
    throw new InvalidOptionsError(
      name,
      "must not be empty: an empty prefix matches every other processor's leases and markers in the store; " +
        "use a name ending with a separator, e.g. 'orders-view.'",
    );
  }
  return prefix;
}

/**
 * @internal Checks a lease scheme and that the .NET scheme comes with the prefix .NET computes: given, and
 * without the `..` separator (which the scheme adds). `prefixName` is the prefix option's name in the caller's
 * options, for the message.
 */
export function checkLeaseScheme(name: string, scheme: unknown, prefix: unknown, prefixName = 'prefix'): void {
  if (scheme === undefined || scheme === 'rxfeed') return;
  if (scheme !== 'dotnet') throw new InvalidOptionsError(name, `must be 'rxfeed' or 'dotnet', got ${String(scheme)}`);
  if (prefix === undefined) {
    throw new InvalidOptionsError(
      name,
      `'dotnet' needs the prefix the .NET processor computes: pass ${prefixName}: await dotnetLeasePrefix({ container, endpoint, processorName })`,
    );
  }
  // A .NET prefix ends with the monitored container's _rid; one ending with '.' was written with the separator.
  if (typeof prefix === 'string' && prefix.endsWith('.')) {
    throw new InvalidOptionsError(
      prefixName,
      `'${prefix}' ends with '.': with leaseScheme 'dotnet' pass the .NET prefix without the '..' separator ` +
        `(rxfeed adds it), i.e. the part of a lease id before '..', or await dotnetLeasePrefix({ container, endpoint, processorName })`,
    );
  }
}

/** @internal Checks `balanceBy`. */
export function checkBalanceBy(name: string, value: unknown): void {
  if (value !== undefined && value !== 'count' && value !== 'load') {
    throw new InvalidOptionsError(name, `must be 'count' or 'load', got ${String(value)}`);
  }
}
