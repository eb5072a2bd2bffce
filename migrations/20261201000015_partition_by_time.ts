import type { Knex } from 'knex';

/**
 * Retention by partition: the tables that grow with traffic become range-partitioned by time, so
 * expired data leaves as whole partitions (DETACH + DROP: milliseconds, no dead rows, no vacuum debt)
 * instead of millions of DELETEd rows.
 *
 * The partition key is an id, not a timestamp. Every id is a TypeID: a UUIDv7 whose first 48 bits are
 * the Unix time in milliseconds, written in Crockford base32 so that the first 10 characters after
 * the prefix encode exactly those 48 bits and the ids sort by time (under the "C" collation, which the
 * partition keys therefore use). A range of ids is a range of time, and a lookup by id, the commonest
 * query, prunes to one partition. The unique key stays `id` itself.
 *
 *   events    by id          daily    a day's events
 *   receipts  by event_id    daily    receipts of that day's events (a provider's late retry of an
 *                                     old event lives with that event, so the two leave together)
 *   attempts  by delivery_id daily    attempts of that day's deliveries
 *   audit_log by id          monthly  kept for a year by default: 13 partitions, not 365
 *
 * deliveries stay one plain table. Every hot query of the scheduler (admission's skip scan over the
 * due index, claims and hand-offs by id, the sweeper's lease scans) would otherwise touch every
 * partition's indexes, and their rows are updated in place two or three times each, so finished ones
 * leave by batched DELETE (see src/ops/retention.ts). Their (event_id, endpoint_id) uniqueness is
 * unchanged.
 *
 * Uniqueness that cannot include the partition key moves to its own table: a provider's dedupe key
 * and a tenant's Idempotency-Key must be unique across all time, not within a day. event_keys holds
 * one row per key with the event it names, and intake claims the key there (INSERT ... ON CONFLICT)
 * before it writes the event. Its rows leave with their event's partition, so a key lives exactly as
 * long as its event.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    -- The smallest TypeID with this prefix made at or after p_at: the 48-bit millisecond time in the
    -- first 10 base32 characters, zeros after. Ids made in the millisecond p_at sort at or above it.
    CREATE FUNCTION typeid_floor(p_prefix text, p_at timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT p_prefix || '_' || string_agg(substr('0123456789abcdefghjkmnpqrstvwxyz',
                                                  (((floor(extract(epoch FROM p_at) * 1000))::bigint >> (5 * (9 - i))) & 31)::int + 1, 1),
                                           '' ORDER BY i) || '0000000000000000'
        FROM generate_series(0, 9) i
    $$;

    -- The creation time a TypeID carries (its first 10 base32 characters); NULL for anything else.
    CREATE FUNCTION typeid_time(p_id text) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT CASE WHEN p_id ~ '^[a-z]([a-z_]*[a-z]){0,1}_[0-7][0-9a-hjkmnp-tv-z]{25}$' THEN
        to_timestamp((SELECT sum((strpos('0123456789abcdefghjkmnpqrstvwxyz', substr(p_id, length(p_id) - 25 + i, 1)) - 1)::bigint << (5 * (9 - i)))
                        FROM generate_series(0, 9) i) / 1000.0)
      END
    $$;

    -- How each partitioned table is cut: which id prefix its key carries and how wide a partition is.
    CREATE TABLE partition_plan (
      table_name text PRIMARY KEY,
      id_prefix text NOT NULL,
      period text NOT NULL CHECK (period IN ('day', 'month'))
    );
    INSERT INTO partition_plan VALUES ('events', 'evt', 'day'), ('receipts', 'evt', 'day'),
                                      ('attempts', 'dlv', 'day'), ('audit_log', 'aud', 'month');

    -- Creates the missing partitions covering [p_from, p_to) and returns how many it made. Names carry
    -- the period they hold (events_p20261201, audit_log_p202612). A period that overlaps a partition
    -- already there (the one holding rows from before partitioning) is left to that partition.
    CREATE FUNCTION ensure_time_partitions(p_from timestamptz, p_to timestamptz) RETURNS integer
    LANGUAGE plpgsql AS $$
    DECLARE
      v_plan partition_plan;
      v_start timestamptz;
      v_end timestamptz;
      v_name text;
      v_lo text;
      v_hi text;
      v_made integer := 0;
    BEGIN
      -- Several processes start at once; one creates, the others then find the partitions there.
      PERFORM pg_advisory_xact_lock(727003);
      FOR v_plan IN SELECT * FROM partition_plan LOOP
        v_start := date_trunc(v_plan.period, p_from, 'UTC');
        WHILE v_start < p_to LOOP
          v_end := v_start + CASE v_plan.period WHEN 'day' THEN interval '1 day' ELSE interval '1 month' END;
          v_name := v_plan.table_name || '_p' || to_char(v_start AT TIME ZONE 'UTC', CASE v_plan.period WHEN 'day' THEN 'YYYYMMDD' ELSE 'YYYYMM' END);
          v_lo := typeid_floor(v_plan.id_prefix, v_start);
          v_hi := typeid_floor(v_plan.id_prefix, v_end);
          IF to_regclass(v_name) IS NULL AND NOT EXISTS (
               SELECT 1 FROM partition_bounds b WHERE b.parent = v_plan.table_name
                  AND (b.lower_bound IS NULL OR b.lower_bound < v_hi) AND (b.upper_bound IS NULL OR b.upper_bound > v_lo)) THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', v_name, v_plan.table_name, v_lo, v_hi);
            v_made := v_made + 1;
          END IF;
          v_start := v_end;
        END LOOP;
      END LOOP;
      RETURN v_made;
    END
    $$;

    -- Up to when rows of each table have been removed by retention: an id older than this that is not
    -- found has expired (GET /v1/events/:id answers 404 expired).
    CREATE TABLE retention_watermarks (
      table_name text PRIMARY KEY,
      removed_before timestamptz NOT NULL
    );

    -- Claimed keys: (source, dedupe key) and (tenant, Idempotency-Key). Source and tenant ids carry
    -- different prefixes, so the two kinds cannot collide in one scope column.
    CREATE TABLE event_keys (
      scope_id text NOT NULL,
      key text NOT NULL,
      event_id text NOT NULL,
      PRIMARY KEY (scope_id, key)
    );
    INSERT INTO event_keys (scope_id, key, event_id)
    SELECT source_id, dedupe_key, id FROM events WHERE source_id IS NOT NULL AND dedupe_key IS NOT NULL
    UNION ALL
    SELECT tenant_id, idempotency_key, id FROM events WHERE idempotency_key IS NOT NULL;

    -- Finished messages leave by age (batched, see src/ops/retention.ts).
    CREATE INDEX messages_updated ON messages (updated_at);

    ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_fkey;
    ALTER TABLE receipts DROP CONSTRAINT receipts_event_id_fkey;
    ALTER TABLE attempts DROP CONSTRAINT attempts_delivery_id_fkey;
    -- Retention compares delivery ids and event ids with partition bounds, so they sort as the
    -- partition keys do ("C": by code point, which for TypeIDs is by time).
    ALTER TABLE deliveries ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN event_id TYPE text COLLATE "C";
    ALTER TABLE events RENAME TO events_unpartitioned;
    ALTER TABLE receipts RENAME TO receipts_unpartitioned;
    ALTER TABLE attempts RENAME TO attempts_unpartitioned;
    ALTER TABLE audit_log RENAME TO audit_log_unpartitioned;
    ALTER INDEX events_pkey RENAME TO events_unpartitioned_pkey;
    ALTER INDEX receipts_pkey RENAME TO receipts_unpartitioned_pkey;
    ALTER INDEX attempts_pkey RENAME TO attempts_unpartitioned_pkey;
    ALTER INDEX audit_log_pkey RENAME TO audit_log_unpartitioned_pkey;
    -- The partitioned tables below name their constraints as the plain ones did (a name PostgreSQL
    -- chose itself would get a suffix while the plain tables still exist).
    DROP INDEX events_tenant_created, events_tenant_type, events_tenant_message, receipts_event,
               receipts_source_digest, attempts_delivery, audit_log_tenant;

    CREATE TABLE events (
      id text COLLATE "C" NOT NULL,
      tenant_id text NOT NULL CONSTRAINT events_tenant_id_fkey REFERENCES tenants(id) ON DELETE CASCADE,
      source_id text CONSTRAINT events_source_id_fkey REFERENCES sources(id) ON DELETE CASCADE,
      origin text NOT NULL CONSTRAINT events_origin_check CHECK (origin IN ('api', 'callback', 'reconcile', 'platform')),
      type text NOT NULL,
      message_id text,
      dedupe_key text,
      idempotency_key text,
      request_hash text,
      status text,
      status_rank integer,
      stale boolean NOT NULL DEFAULT false,
      provider_sequence bigint,
      seq bigint NOT NULL DEFAULT nextval('events_seq_seq'),
      body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (id)
    ) PARTITION BY RANGE (id);
    ALTER SEQUENCE events_seq_seq OWNED BY events.seq;
    CREATE INDEX events_tenant_created ON events (tenant_id, id DESC);
    CREATE INDEX events_tenant_type ON events (tenant_id, type, id DESC);
    CREATE INDEX events_tenant_message ON events (tenant_id, message_id, seq) WHERE message_id IS NOT NULL;

    CREATE TABLE receipts (
      id text NOT NULL,
      tenant_id text NOT NULL CONSTRAINT receipts_tenant_id_fkey REFERENCES tenants(id) ON DELETE CASCADE,
      source_id text NOT NULL CONSTRAINT receipts_source_id_fkey REFERENCES sources(id) ON DELETE CASCADE,
      event_id text COLLATE "C" NOT NULL CONSTRAINT receipts_event_id_fkey REFERENCES events(id) ON DELETE CASCADE,
      outcome text NOT NULL CONSTRAINT receipts_outcome_check CHECK (outcome IN ('accepted', 'duplicate', 'stale')),
      origin text NOT NULL CONSTRAINT receipts_origin_check CHECK (origin IN ('callback', 'reconcile')),
      body_digest text NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (event_id, id)
    ) PARTITION BY RANGE (event_id);
    -- Byte-identical repeats are answered from this index without parsing the body again.
    CREATE INDEX receipts_source_digest ON receipts (source_id, body_digest);

    CREATE TABLE attempts (
      id text NOT NULL,
      delivery_id text COLLATE "C" NOT NULL CONSTRAINT attempts_delivery_id_fkey REFERENCES deliveries(id) ON DELETE CASCADE,
      tenant_id text NOT NULL,
      attempt_number integer NOT NULL,
      trigger text NOT NULL CONSTRAINT attempts_trigger_check CHECK (trigger IN ('initial', 'retry', 'replay')),
      started_at timestamptz NOT NULL,
      duration_ms integer NOT NULL,
      status_code integer,
      outcome text NOT NULL CONSTRAINT attempts_outcome_check CHECK (outcome IN ('success', 'retry', 'terminal')),
      error_class text,
      error_message text,
      response_excerpt text,
      next_attempt_at timestamptz,
      PRIMARY KEY (delivery_id, id)
    ) PARTITION BY RANGE (delivery_id);

    CREATE TABLE audit_log (
      id text COLLATE "C" NOT NULL,
      tenant_id text CONSTRAINT audit_log_tenant_id_fkey REFERENCES tenants(id) ON DELETE CASCADE,
      actor_type text NOT NULL CONSTRAINT audit_log_actor_type_check CHECK (actor_type IN ('api_key', 'admin', 'system')),
      actor_id text,
      action text NOT NULL,
      target_type text NOT NULL,
      target_id text NOT NULL,
      reason text,
      details jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (id)
    ) PARTITION BY RANGE (id);
    CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id DESC);

    -- Every partition of the time-partitioned tables with its id range (NULL: unbounded).
    CREATE VIEW partition_bounds AS
      SELECT parent.relname::text AS parent, child.relname::text AS name,
             nullif(substring(pg_get_expr(child.relpartbound, child.oid) FROM $re$FROM \\('([^']*)'\\)$re$), '') AS lower_bound,
             nullif(substring(pg_get_expr(child.relpartbound, child.oid) FROM $re$TO \\('([^']*)'\\)$re$), '') AS upper_bound,
             i.inhdetachpending AS detach_pending
        FROM pg_inherits i
        JOIN pg_class parent ON parent.oid = i.inhparent
        JOIN pg_class child ON child.oid = i.inhrelid
       WHERE parent.relname IN (SELECT table_name FROM partition_plan);
  `);

  // Rows from before partitioning go to one partition per table that ends where the day (or month)
  // of the newest of them ends; retention drops it whole once all of it has expired.
  for (const [table, key, prefix, period] of [
    ['events', 'id', 'evt', 'day'],
    ['receipts', 'event_id', 'evt', 'day'],
    ['attempts', 'delivery_id', 'dlv', 'day'],
    ['audit_log', 'id', 'aud', 'month'],
  ] as const) {
    const { rows } = await knex.raw<{ rows: Array<{ newest: string | null }> }>(`SELECT max(${key} COLLATE "C") AS newest FROM ${table}_unpartitioned`);
    const newest = rows[0]?.newest;
    if (newest) {
      await knex.raw(
        `CREATE TABLE ${table}_before_partitioning PARTITION OF ${table}
           FOR VALUES FROM (MINVALUE) TO (typeid_floor('${prefix}', date_trunc('${period}', greatest(now(), typeid_time(?)), 'UTC') + interval '1 ${period}'))`,
        [newest],
      );
    }
  }
  await knex.raw(`
    SELECT ensure_time_partitions(now() - interval '1 day', now() + interval '8 days');
    INSERT INTO events SELECT * FROM events_unpartitioned;
    INSERT INTO receipts SELECT * FROM receipts_unpartitioned;
    INSERT INTO attempts (id, delivery_id, tenant_id, attempt_number, trigger, started_at, duration_ms, status_code, outcome,
                          error_class, error_message, response_excerpt, next_attempt_at)
    SELECT id, delivery_id, tenant_id, attempt_number, trigger, started_at, duration_ms, status_code, outcome,
           error_class, error_message, response_excerpt, next_attempt_at
      FROM attempts_unpartitioned;
    INSERT INTO audit_log SELECT * FROM audit_log_unpartitioned;
    DROP TABLE events_unpartitioned, receipts_unpartitioned, attempts_unpartitioned, audit_log_unpartitioned;
    ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events(id) ON DELETE CASCADE;
  `);
}

/** Back to plain tables with the original constraints, rows included (slow on a large database). */
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_fkey;
    ALTER TABLE attempts DROP CONSTRAINT attempts_delivery_id_fkey;
    ALTER TABLE deliveries ALTER COLUMN id TYPE text COLLATE "default", ALTER COLUMN event_id TYPE text COLLATE "default";
    ALTER SEQUENCE events_seq_seq OWNED BY NONE;
    CREATE TABLE events_rows AS SELECT * FROM events;
    CREATE TABLE receipts_rows AS SELECT * FROM receipts;
    CREATE TABLE attempts_rows AS SELECT * FROM attempts;
    CREATE TABLE audit_log_rows AS SELECT * FROM audit_log;
    DROP TABLE attempts, receipts, events, audit_log;
    DROP VIEW partition_bounds;
    DROP FUNCTION ensure_time_partitions, typeid_floor, typeid_time;
    DROP TABLE partition_plan, retention_watermarks, event_keys;
    DROP INDEX messages_updated;

    CREATE TABLE events (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      source_id text REFERENCES sources(id) ON DELETE CASCADE,
      origin text NOT NULL CONSTRAINT events_origin_check CHECK (origin IN ('api', 'callback', 'reconcile', 'platform')),
      type text NOT NULL,
      message_id text,
      dedupe_key text,
      idempotency_key text,
      request_hash text,
      status text,
      status_rank integer,
      stale boolean NOT NULL DEFAULT false,
      provider_sequence bigint,
      seq bigint NOT NULL DEFAULT nextval('events_seq_seq'),
      body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT events_source_dedupe UNIQUE (source_id, dedupe_key),
      CONSTRAINT events_tenant_idempotency UNIQUE (tenant_id, idempotency_key)
    );
    ALTER SEQUENCE events_seq_seq OWNED BY events.seq;
    CREATE INDEX events_tenant_created ON events (tenant_id, id DESC);
    CREATE INDEX events_tenant_type ON events (tenant_id, type, id DESC);
    CREATE INDEX events_tenant_message ON events (tenant_id, message_id, seq) WHERE message_id IS NOT NULL;
    INSERT INTO events SELECT * FROM events_rows;

    CREATE TABLE receipts (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      source_id text NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
      event_id text NOT NULL REFERENCES events(id) ON DELETE CASCADE,
      outcome text NOT NULL CHECK (outcome IN ('accepted', 'duplicate', 'stale')),
      origin text NOT NULL CHECK (origin IN ('callback', 'reconcile')),
      body_digest text NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX receipts_event ON receipts (event_id, received_at);
    CREATE INDEX receipts_source_digest ON receipts (source_id, body_digest);
    INSERT INTO receipts SELECT * FROM receipts_rows;

    CREATE TABLE attempts (
      id text PRIMARY KEY,
      delivery_id text NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
      tenant_id text NOT NULL,
      attempt_number integer NOT NULL,
      trigger text NOT NULL CHECK (trigger IN ('initial', 'retry', 'replay')),
      started_at timestamptz NOT NULL,
      duration_ms integer NOT NULL,
      status_code integer,
      outcome text NOT NULL CHECK (outcome IN ('success', 'retry', 'terminal')),
      error_class text,
      error_message text,
      response_excerpt text,
      next_attempt_at timestamptz
    );
    CREATE INDEX attempts_delivery ON attempts (delivery_id, started_at);
    INSERT INTO attempts SELECT * FROM attempts_rows;

    CREATE TABLE audit_log (
      id text PRIMARY KEY,
      tenant_id text REFERENCES tenants(id) ON DELETE CASCADE,
      actor_type text NOT NULL CHECK (actor_type IN ('api_key', 'admin', 'system')),
      actor_id text,
      action text NOT NULL,
      target_type text NOT NULL,
      target_id text NOT NULL,
      reason text,
      details jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id DESC);
    INSERT INTO audit_log SELECT * FROM audit_log_rows;

    DROP TABLE events_rows, receipts_rows, attempts_rows, audit_log_rows;
    ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events(id) ON DELETE CASCADE;
  `);
}
