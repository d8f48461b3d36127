import type { Link } from '@opentelemetry/api';
import type { Change } from '../core/Change.js';
import type { OtelApi } from './openTelemetryApi.js';

/** The most links one span gets (OpenTelemetry's default link count limit). */
const MAX_LINKS = 128;
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * Links to the trace contexts carried by the documents of `changes` in `field` (a W3C `traceparent` string,
 * or an object with `traceparent` and `tracestate`): one per distinct context, at most 128; `undefined` for none. Parsed here rather
 * than through the app's propagator, which is a no-op unless the app set one.
 *
 * @internal
 */
export function traceLinks(api: OtelApi, changes: readonly Change<unknown>[], field: string): Link[] | undefined {
  // Allocated at the first context found: most batches carry none, and cost a property read per change.
  let links: Link[] | undefined;
  let seen: Set<string> | undefined;
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!;
    const carrier = (change.document ?? change.previous) as Record<string, unknown> | undefined;
    const value = carrier?.[field];
    if (value === undefined || value === null) continue;
    if (links !== undefined && links.length >= MAX_LINKS) break;
    const parent = typeof value === 'string' ? value : (value as { traceparent?: unknown }).traceparent;
    if (typeof parent !== 'string' || seen?.has(parent)) continue;
    const match = TRACEPARENT.exec(parent.trim().toLowerCase());
    if (!match || match[1] === 'ff') continue;
    const state = (value as { tracestate?: unknown } | undefined)?.tracestate;
    const context = {
      traceId: match[2]!,
      spanId: match[3]!,
      traceFlags: parseInt(match[4]!, 16) & 1,
      isRemote: true,
      ...(typeof state === 'string' && state !== '' ? { traceState: api.createTraceState(state) } : {}),
    };
    if (!api.trace.isSpanContextValid(context)) continue;
    (seen ??= new Set()).add(parent);
    (links ??= []).push({ context });
  }
  return links;
}
