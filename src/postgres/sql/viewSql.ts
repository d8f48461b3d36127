import { InvalidOptionsError } from '../../errors/index.js';
import { hashString } from '../../internal/random.js';

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
// Type names users may give for extracted columns: words, optional (precision[, scale]), optional [].
const TYPE = /^[a-z][a-z0-9_ ]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?(\[\])?$/i;
const SYSTEM_COLUMNS = new Set(['key', 'doc', 'lsn', 'ts_ms', 'partition_id']);

/** A column computed by PostgreSQL from the row (used by the search index for its tsvector). */
export interface GeneratedColumn {
  readonly name: string;
  readonly type: string;
  /** SQL expression over the `doc` column; must be immutable. */
  readonly expression: string;
}

/** The tables behind one view: `<table>`, `<table>_tombstones`, `<table>_positions`, `<table>_lineage`. */
export interface ViewTableSpec {
  readonly schema: string;
  readonly table: string;
  /** Extra typed columns copied from the row's top-level properties, name → SQL type. */
  readonly columns?: Readonly<Record<string, string>>;
  readonly generated?: readonly GeneratedColumn[];
  /** Extra DDL run after the tables exist (index creation); `{table}` is replaced by the qualified name. */
  readonly extraDdl?: readonly string[];
}

const quote = (identifier: string) => `"${identifier}"`;

/** Checks names and types, so that nothing user-given reaches SQL unquoted or unchecked. */
export function validateTableSpec(spec: ViewTableSpec): void {
  for (const [option, value] of [
    ['schema', spec.schema],
    ['table', spec.table],
  ] as const) {
    if (typeof value !== 'string' || !IDENTIFIER.test(value) || value.length > 48) {
      throw new InvalidOptionsError(
        option,
        `${JSON.stringify(value)} must be a lower-case SQL name of at most 48 characters (letters, digits, _)`,
      );
    }
  }
  for (const [name, type] of Object.entries(spec.columns ?? {})) {
    if (!IDENTIFIER.test(name) || name.length > 63 || SYSTEM_COLUMNS.has(name)) {
      throw new InvalidOptionsError(
        'columns',
        `column name ${JSON.stringify(name)} must be a lower-case SQL name and not one of ${[...SYSTEM_COLUMNS].join(', ')}`,
      );
    }
    if (typeof type !== 'string' || !TYPE.test(type)) {
      throw new InvalidOptionsError('columns', `column ${name} has type ${JSON.stringify(type)}; give a SQL type such as 'text', 'numeric(12,2)' or 'timestamptz'`);
    }
  }
}

/** A statement worth preparing once per connection: its text and a name derived from the text. */
export interface PreparedSql {
  /** `rxfeed_` and a 64-bit hash of `text`: the same text gets the same name in every process. */
  readonly name: string;
  readonly text: string;
}

/** Names `text` after its hash, for a prepared statement. */
export function prepared(text: string): PreparedSql {
  return { name: `rxfeed_${hashString(text).toString(36)}_${hashString(`rxfeed:${text}`).toString(36)}`, text };
}

/** Every statement a SQL view store runs, built once per table. */
export interface ViewSql {
  readonly qualified: string;
  readonly ddl: readonly string[];
  readonly lockName: string;
  /**
   * Locks the lineage row in key-share mode and returns its `generation`: the number of times a partition's
   * key range was stored over part of another partition's stored range. Every write locks it before its
   * partitions' rows; storing such a range locks it with {@link ViewSql.lockLineageForRanges} and bumps it
   * ({@link ViewSql.bumpLineage}), so that a write planned on an older generation (which could not see the
   * new range) plans again.
   */
  readonly lockLineage: string;
  /**
   * {@link ViewSql.lockLineage} in exclusive mode (waits for the writes in flight and blocks new ones), to
   * store ranges that overlap another partition's stored range.
   */
  readonly lockLineageForRanges: string;
  /**
   * The lineage row locked against other range stores only (`FOR NO KEY UPDATE`: writes' key-share locks
   * do not conflict with it), to store ranges that overlap no other partition's stored range: no write's
   * range fence or inherited mark can change with them, so writes in flight need not be waited for, and the
   * generation stays. Ranges are stored one transaction at a time either way, so each sees the ones before.
   */
  readonly lockLineageForNewRanges: string;
  /** Bumps the lineage generation; returns the new one. */
  readonly bumpLineage: string;
  /**
   * Stores the ranges in `$1` (JSON `partition_id`, `epoch`, `range_min`, `range_max`) on their partitions'
   * rows, raising their epochs (the rows exist: {@link ViewSql.lockPartitions} inserted them).
   */
  readonly storeRanges: string;
  /**
   * Locks the rows of the partitions in `$1` (a JSON array), inserting missing ones; returns their epoch,
   * LSN and range.
   */
  readonly lockPartitions: string;
  /**
   * A whole guarded write in one statement, planned on a state of its partitions: `$1` that state (JSON
   * `partition_id`, `epoch`, `lsn` per partition), `$2` the upserts (`key`, `doc`, `lsn`, `ts_ms`,
   * `partition_id`), `$3` the deletes (`key`, `lsn`, `ts_ms`), `$4` the commits (`partition_id`, `position`,
   * `epoch`, `lsn`, `range_min`, `range_max`), `$5` the lineage generation the plan saw. It locks the lineage
   * row, then the partitions' rows, and writes only if the generation is still `$5`, each partition still
   * holds that epoch and LSN and no transaction changed it after the statement's snapshot was taken (the rows
   * would then be read through a stale snapshot), and no other partition stored the same or a higher epoch
   * over part of a commit's range (the range fence, see `isFenced`). Returns one row: `ok` (whether it wrote), `written` (rows inserted
   * or updated), `deleted` (rows removed).
   */
  readonly writeGuarded: PreparedSql;
  /** {@link ViewSql.writeGuarded} with unguarded upserts and deletes, and no tombstones. */
  readonly writeUnguarded: PreparedSql;
  /**
   * The row statements of {@link ViewSql.writeGuarded} on their own, each taking its JSON input in `$1`: the
   * hand-written loop that `bench/views.ts` compares rxfeed with runs exactly these.
   */
  readonly upsertGuarded: string;
  readonly tombstone: string;
  readonly deleteGuarded: string;
  /**
   * Partitions whose stored range overlaps one of the ranges in `$1` (JSON `range_min`, `range_max`): their
   * id, epoch, LSN mark and range (the range fence and the marks a split or merge child inherits).
   */
  readonly selectRanges: string;
  readonly selectOne: string;
  readonly selectAll: string;
  readonly selectPositions: string;
  readonly pruneTombstones: string;
  readonly clearPositions: string;
}

/** Builds the SQL for one view; inputs are JSON arrays in parameters. */
export function viewSql(spec: ViewTableSpec): ViewSql {
  validateTableSpec(spec);
  const schema = quote(spec.schema);
  const rows = `${schema}.${quote(spec.table)}`;
  const tombstones = `${schema}.${quote(`${spec.table}_tombstones`)}`;
  const positions = `${schema}.${quote(`${spec.table}_positions`)}`;
  const lineage = `${schema}.${quote(`${spec.table}_lineage`)}`;
  const extracted = Object.entries(spec.columns ?? {});
  const generated = spec.generated ?? [];

  const userColumnDdl = [
    ...extracted.map(([name, type]) => `, ${quote(name)} ${type}`),
    ...generated.map((g) => `, ${quote(g.name)} ${g.type} GENERATED ALWAYS AS (${g.expression}) STORED`),
  ].join('');
  const extractedNames = extracted.map(([name]) => `, ${quote(name)}`).join('');
  const extractedValues = extracted
    .map(([name, type]) => {
      const json = /^jsonb?$/i.test(type.trim());
      return `, (r.doc ${json ? '->' : '->>'} '${name}')::${type}`;
    })
    .join('');
  const extractedUpdates = extracted.map(([name]) => `, ${quote(name)} = excluded.${quote(name)}`).join('');

  // Each piece of a write reads its input from the parameter `input`; `gate` is the condition the write adds
  // (none for the pieces run on their own). Rows and tombstones are reached through their key index whatever
  // the plan: a prepared statement keeps the plan made while the tables were small (a view filling up from
  // the start of a feed), where a join on the input could scan them whole on every write. Hence the
  // tombstone check as a per-row subquery (NOT EXISTS would become such a join) and the deletes' redundant
  // `key = ANY (…)` (an index condition on the rows whatever the join).
  const where = (...conditions: string[]) => {
    const all = conditions.filter((c) => c !== '');
    return all.length > 0 ? `WHERE ${all.join(' AND ')}` : '';
  };
  const and = (gate: string) => (gate ? ` AND ${gate}` : '');
  const upsert = (guarded: boolean, input = '$1', gate = '') =>
    `INSERT INTO ${rows} AS t (key, doc, lsn, ts_ms, partition_id${extractedNames})
     SELECT r.key, r.doc, r.lsn, r.ts_ms, r.partition_id${extractedValues}
     FROM jsonb_to_recordset(${input}::jsonb) AS r(key text, doc jsonb, lsn bigint, ts_ms bigint, partition_id text)
     ${where(guarded ? `NOT coalesce((SELECT d.lsn >= r.lsn FROM ${tombstones} d WHERE d.key = r.key), false)` : '', gate)}
     ORDER BY r.key
     ON CONFLICT (key) DO UPDATE SET doc = excluded.doc, lsn = excluded.lsn, ts_ms = excluded.ts_ms,
       partition_id = excluded.partition_id${extractedUpdates}
     ${guarded ? 'WHERE excluded.lsn > t.lsn' : ''}`;
  const tombstone = (input = '$1', gate = '') =>
    `INSERT INTO ${tombstones} AS d (key, lsn, ts_ms)
       SELECT r.key, r.lsn, r.ts_ms FROM jsonb_to_recordset(${input}::jsonb) AS r(key text, lsn bigint, ts_ms bigint)${gate ? ` WHERE ${gate}` : ''} ORDER BY r.key
       ON CONFLICT (key) DO UPDATE SET lsn = excluded.lsn, ts_ms = excluded.ts_ms WHERE excluded.lsn > d.lsn`;
  const deleteRows = (guarded: boolean, input = '$1', gate = '') =>
    `DELETE FROM ${rows} AS t USING jsonb_to_recordset(${input}::jsonb) AS r(key text, lsn bigint)
       WHERE t.key = r.key${guarded ? ' AND t.lsn < r.lsn' : ''}
         AND t.key = ANY (ARRAY(SELECT k.key FROM jsonb_to_recordset(${input}::jsonb) AS k(key text)))${and(gate)}`;
  // A replay (no position) keeps the stored position but still raises the epoch.
  const commitPositions = (input: string, gate: string) =>
    `UPDATE ${positions} AS p SET position = COALESCE(r.position, p.position),
         epoch = GREATEST(p.epoch, r.epoch), lsn = GREATEST(p.lsn, r.lsn),
         range_min = COALESCE(r.range_min, p.range_min), range_max = COALESCE(r.range_max, p.range_max), updated_at = now()
       FROM jsonb_to_recordset(${input}::jsonb) AS r(partition_id text, position text, epoch bigint, lsn bigint, range_min text, range_max text)
       WHERE p.partition_id = r.partition_id${and(gate)}`;
  // One snapshot serves the whole statement, taken before the row locks are granted: a locked row whose
  // version (xmin) differs from the one in the snapshot was written by a transaction that committed in
  // between, and the statement writes nothing (the caller falls back to a transaction that locks first, so
  // that the write's snapshot is taken after the locks). The lineage row is locked first (`locked` reads it
  // before locking any partition row, then `verdict` reads all of `locked` before any piece writes): a
  // write that stores a range over part of another partition's holds it exclusively and bumps its
  // generation, so a generation other than `$5` means the range fence below (or the marks the plan
  // inherited) may have been checked against a snapshot without that range. A range stored over no other
  // partition's cannot fence this write nor pass it a mark, so it neither waits for this lock nor bumps.
  const write = (guarded: boolean) => {
    const gate = '(SELECT ok FROM verdict)';
    return `WITH expected AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS e(partition_id text, epoch bigint, lsn bigint)
       ), lineage AS (
         SELECT l.generation FROM ${lineage} l WHERE l.id = 1 FOR KEY SHARE
       ), seen AS (
         SELECT p.partition_id, p.xmin AS version FROM ${positions} p WHERE p.partition_id IN (SELECT partition_id FROM expected)
       ), locked AS (
         SELECT p.partition_id, p.epoch, p.lsn, p.xmin AS version FROM ${positions} p
         WHERE p.partition_id IN (SELECT partition_id FROM expected) AND (SELECT generation FROM lineage) = $5::bigint
         ORDER BY p.partition_id FOR UPDATE OF p
       ), fenced AS (
         SELECT 1 FROM jsonb_to_recordset($4::jsonb) AS c(partition_id text, epoch bigint, range_min text, range_max text)
         JOIN ${positions} o ON o.partition_id <> c.partition_id
           AND o.range_min < c.range_max COLLATE "C" AND c.range_min COLLATE "C" < o.range_max
         WHERE o.epoch >= c.epoch
       ), verdict AS (
         SELECT count(*) = (SELECT count(*) FROM expected)
           AND coalesce(bool_and(l.epoch = e.epoch AND l.lsn IS NOT DISTINCT FROM e.lsn AND l.version = s.version), true)
           AND NOT EXISTS (SELECT 1 FROM fenced) AS ok
         FROM expected e JOIN locked l USING (partition_id) JOIN seen s USING (partition_id)
       ), upserted AS (${upsert(guarded, '$2', gate)} RETURNING 1
       )${guarded ? `, tombstoned AS (${tombstone('$3', gate)})` : ''}, deleted AS (${deleteRows(guarded, '$3', gate)} RETURNING 1
       ), committed AS (${commitPositions('$4', gate)})
       SELECT (SELECT ok FROM verdict) AS ok, (SELECT count(*) FROM upserted)::int AS written, (SELECT count(*) FROM deleted)::int AS deleted`;
  };

  return {
    qualified: rows,
    lockName: `rxfeed:view:${spec.schema}.${spec.table}`,
    ddl: [
      `CREATE SCHEMA IF NOT EXISTS ${schema}`,
      `CREATE TABLE IF NOT EXISTS ${rows} (
         key text PRIMARY KEY, doc jsonb NOT NULL, lsn bigint NOT NULL, ts_ms bigint NOT NULL,
         partition_id text NOT NULL${userColumnDdl})`,
      `CREATE TABLE IF NOT EXISTS ${tombstones} (key text PRIMARY KEY, lsn bigint NOT NULL, ts_ms bigint NOT NULL)`,
      `CREATE TABLE IF NOT EXISTS ${positions} (
         partition_id text PRIMARY KEY, position text, epoch bigint NOT NULL DEFAULT 0, lsn bigint,
         updated_at timestamptz NOT NULL DEFAULT now())`,
      // Added after the first release: tables created before get the range columns here.
      `ALTER TABLE ${positions} ADD COLUMN IF NOT EXISTS range_min text COLLATE "C"`,
      `ALTER TABLE ${positions} ADD COLUMN IF NOT EXISTS range_max text COLLATE "C"`,
      `CREATE TABLE IF NOT EXISTS ${lineage} (id int PRIMARY KEY CHECK (id = 1), generation bigint NOT NULL DEFAULT 0)`,
      `INSERT INTO ${lineage} (id) VALUES (1) ON CONFLICT (id) DO NOTHING`,
      ...(spec.extraDdl ?? []).map((ddl) => ddl.replaceAll('{table}', rows)),
    ],
    // Inserting a placeholder or touching the existing row locks each partition's row until commit, so
    // two hosts writing the same partition serialize and the fencing check below cannot race.
    lockPartitions: `INSERT INTO ${positions} AS p (partition_id)
       SELECT value FROM jsonb_array_elements_text($1::jsonb) ORDER BY 1
       ON CONFLICT (partition_id) DO UPDATE SET partition_id = p.partition_id
       RETURNING partition_id, epoch, lsn, range_min, range_max`,
    lockLineage: `SELECT generation FROM ${lineage} WHERE id = 1 FOR KEY SHARE`,
    lockLineageForRanges: `SELECT generation FROM ${lineage} WHERE id = 1 FOR UPDATE`,
    lockLineageForNewRanges: `SELECT generation FROM ${lineage} WHERE id = 1 FOR NO KEY UPDATE`,
    bumpLineage: `UPDATE ${lineage} SET generation = generation + 1 WHERE id = 1 RETURNING generation`,
    storeRanges: `UPDATE ${positions} AS p SET range_min = r.range_min, range_max = r.range_max,
         epoch = GREATEST(p.epoch, r.epoch), updated_at = now()
       FROM jsonb_to_recordset($1::jsonb) AS r(partition_id text, epoch bigint, range_min text, range_max text)
       WHERE p.partition_id = r.partition_id`,
    writeGuarded: prepared(write(true)),
    writeUnguarded: prepared(write(false)),
    upsertGuarded: upsert(true),
    tombstone: tombstone(),
    deleteGuarded: deleteRows(true),
    selectRanges: `SELECT o.partition_id, o.epoch, o.lsn, o.range_min, o.range_max FROM ${positions} o
       WHERE o.range_min IS NOT NULL AND o.range_max IS NOT NULL AND EXISTS (
         SELECT 1 FROM jsonb_to_recordset($1::jsonb) AS r(range_min text, range_max text)
         WHERE o.range_min < r.range_max COLLATE "C" AND r.range_min COLLATE "C" < o.range_max)`,
    selectOne: `SELECT key, doc, lsn, ts_ms, partition_id FROM ${rows} WHERE key = $1`,
    selectAll: `SELECT key, doc, lsn, ts_ms, partition_id FROM ${rows} ORDER BY key COLLATE "C"`,
    selectPositions: `SELECT partition_id, position, epoch, lsn, range_min, range_max FROM ${positions}
       WHERE position IS NOT NULL ORDER BY partition_id`,
    pruneTombstones: `DELETE FROM ${tombstones} WHERE ts_ms < $1`,
    clearPositions: `DELETE FROM ${positions}`,
  };
}
