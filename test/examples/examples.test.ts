import { afterEach, describe, expect, it, vi } from 'vitest';
import { main as cqrsOrderSummary } from '../../examples/cqrs-order-summary.js';
import { main as searchSync } from '../../examples/search-sync.js';
import { PG_URL, postgresUnavailable } from '../sinks/postgres.js';

// The examples print their progress; keep it and look for their final check line.
function captureLog(): () => string {
  const lines: string[] = [];
  const spy = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void lines.push(args.join(' ')));
  return () => {
    spy.mockRestore();
    return lines.join('\n');
  };
}

// Settings come from the environment as for a user: COSMOS_ENDPOINT/COSMOS_KEY when CI sets them, the embedded
// emulator otherwise; the view on PGlite unless DATABASE_URL is given.
const withoutDatabaseUrl = (): NodeJS.ProcessEnv => ({ ...process.env, DATABASE_URL: undefined });

afterEach(() => vi.restoreAllMocks());

describe('examples/cqrs-order-summary.ts', () => {
  it('materializes the orders into the SQL view and its final check passes (PGlite)', { timeout: 180_000 }, async () => {
    const output = captureLog();
    const result = await cqrsOrderSummary(withoutDatabaseUrl());
    const log = output();
    expect(result.ok, log).toBe(true);
    expect(log).toMatch(/^check: OK/m);
    // 400 orders, every tenth cancelled: the view holds the open ones, and the report sees them.
    expect(result.orders).toBe(400);
    expect(result.rows).toBe(360 + 10); // 30 of the first 300 and 0 of the last 100 are cancelled
    expect(result.topCustomers).toHaveLength(5);
    expect(result.topCustomers[0]!.total_cents).toBeGreaterThanOrEqual(result.topCustomers[4]!.total_cents);
  });

  it('works the same on PostgreSQL (DATABASE_URL)', { timeout: 180_000 }, async () => {
    const unavailable = await postgresUnavailable();
    if (unavailable) return; // printed by postgresUnavailable; required under CI=true
    const output = captureLog();
    const result = await cqrsOrderSummary({ ...process.env, DATABASE_URL: PG_URL });
    const log = output();
    expect(result.ok, log).toBe(true);
    expect(result.rows).toBe(370);
  });
});

describe('examples/search-sync.ts', () => {
  it('syncs the products into the full-text index, finds what it should and its final check passes (PGlite)', { timeout: 180_000 }, async () => {
    const output = captureLog();
    const result = await searchSync(withoutDatabaseUrl(), 'waterproof jacket');
    const log = output();
    expect(result.ok, log).toBe(true);
    expect(log).toMatch(/^check: OK/m);
    expect(result.indexed).toBe(19); // 20 products, one discontinued
    expect(result.hits.map((h) => h.id)).toEqual(expect.arrayContaining(['product-0', 'product-5']));
    expect(result.hits.every((h) => /jacket/i.test(h.document.title ?? ''))).toBe(true);
  });

  it('works the same on PostgreSQL (DATABASE_URL)', { timeout: 180_000 }, async () => {
    const unavailable = await postgresUnavailable();
    if (unavailable) return; // printed by postgresUnavailable; required under CI=true
    const output = captureLog();
    const result = await searchSync({ ...process.env, DATABASE_URL: PG_URL }, 'coffee');
    const log = output();
    expect(result.ok, log).toBe(true);
    expect(result.hits.map((h) => h.id).sort()).toEqual(['product-10', 'product-13']);
  });
});

describe('examples/handlers.ts', () => {
  it('two hosts process every order through handlers, dead-letter the poison one and re-drive it; its final check passes', { timeout: 60_000 }, async () => {
    const { main: handlers } = await import('../../examples/handlers.js');
    const output = captureLog();
    const result = await handlers();
    const log = output();
    expect(result.ok, log).toBe(true);
    expect(log).toMatch(/^check: OK/m);
    expect(result).toMatchObject({ shipped: 200, deadLettered: 1, redriven: 1 });
    expect(log).toMatch(/dead letter: order-42 after 3 attempts: order order-42 has a negative total/);
  });
});
