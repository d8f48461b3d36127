import pg from 'pg';

/** The test database: `RXFEED_TEST_PG_URL`, or the local PostgreSQL on 127.0.0.1:5432 (db `test`, trust). */
export const PG_URL = process.env.RXFEED_TEST_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';

/**
 * Why PostgreSQL tests cannot run here, or `undefined` when they can. Under `CI=true` PostgreSQL is required,
 * so this throws instead of skipping.
 */
export async function postgresUnavailable(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (error) {
    const reason = `PostgreSQL at ${PG_URL.replace(/\/\/[^@]*@/, '//')} is unreachable (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${reason}; it is required under CI=true`);
    console.warn(`skipping PostgreSQL view tests: ${reason}`);
    return reason;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A schema name no other run uses. */
export function uniqueSchema(prefix: string): string {
  return `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
}
