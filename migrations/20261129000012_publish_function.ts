import type { Knex } from 'knex';

/**
 * Publishing an event (`POST /v1/events`, and the platform's own operational events) in one
 * statement instead of BEGIN, the event insert, the message row, fan-out and COMMIT: one round trip,
 * atomic because it is one statement. Fan-out is `fan_out_insert`, shared with callback intake
 * (migration 20261129000011).
 *
 * Ids come from the caller as for intake: the event id and a guess of delivery ids; when more
 * endpoints match than ids were given, nothing is written and `endpoint_count` says how many.
 */
/** publish_event as this migration creates it (migration 20261201000016 restores it on the way down). */
export const publishEventFunction = `
    -- outcome: 'created'; 'duplicate' (the tenant already used this Idempotency-Key: the first
    -- event comes back with the request_hash it was made from, and the caller decides between the
    -- same request, answered with that event, and a different one, which is a conflict); or
    -- 'need_ids'. The event's columns come back for the answer.
    CREATE FUNCTION publish_event(
      p_event_id text, p_delivery_ids text[], p_tenant_id text, p_origin text, p_type text, p_message_id text,
      p_idempotency_key text, p_request_hash text, p_body text, p_created_at timestamptz,
      p_default_max_age_seconds integer,
      OUT outcome text, OUT endpoint_count integer, OUT pending integer, OUT dead_disabled integer,
      OUT id text, OUT tenant_id text, OUT source_id text, OUT origin text, OUT type text, OUT message_id text,
      OUT status text, OUT stale boolean, OUT body text, OUT created_at timestamptz, OUT seq bigint,
      OUT request_hash text)
    LANGUAGE plpgsql AS $$
    DECLARE
      -- Read before anything is written, so that too few ids can be answered without writing.
      v_targets fan_out_target[] := fan_out_targets(p_tenant_id, p_type);
      v_event events%ROWTYPE;
    BEGIN
      endpoint_count := cardinality(v_targets);
      pending := 0;
      dead_disabled := 0;
      IF endpoint_count > cardinality(p_delivery_ids) THEN
        outcome := 'need_ids';
        RETURN;
      END IF;

      INSERT INTO events AS e (id, tenant_id, origin, type, message_id, idempotency_key, request_hash, body, created_at)
      VALUES (p_event_id, p_tenant_id, p_origin, p_type, p_message_id, p_idempotency_key, p_request_hash, p_body, p_created_at)
      ON CONFLICT ON CONSTRAINT events_tenant_idempotency DO NOTHING
      RETURNING e.* INTO v_event;

      IF v_event.id IS NULL THEN
        -- A VOLATILE function takes a fresh snapshot per statement: an event a concurrent request
        -- committed with the same key while our insert waited on it is found here.
        outcome := 'duplicate';
        SELECT e.* INTO v_event FROM events e WHERE e.tenant_id = p_tenant_id AND e.idempotency_key = p_idempotency_key;
      ELSE
        outcome := 'created';
        IF p_message_id IS NOT NULL THEN
          -- Taken before fan-out draws the event's place in its message's order (see fan_out_insert).
          INSERT INTO messages AS m (tenant_id, source_id, message_id, last_event_id)
          VALUES (p_tenant_id, NULL, p_message_id, p_event_id)
          ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE SET last_event_id = EXCLUDED.last_event_id, updated_at = now();
        END IF;
        SELECT f.pending, f.dead_disabled INTO pending, dead_disabled
          FROM fan_out_insert(p_event_id, p_tenant_id, p_created_at,
                              CASE WHEN p_message_id IS NOT NULL THEN 'api:' || p_message_id END,
                              NULL, p_default_max_age_seconds, v_targets, p_delivery_ids) f;
      END IF;

      id := v_event.id; tenant_id := v_event.tenant_id; source_id := v_event.source_id; origin := v_event.origin;
      type := v_event.type; message_id := v_event.message_id; status := v_event.status; stale := v_event.stale;
      body := v_event.body; created_at := v_event.created_at; seq := v_event.seq; request_hash := v_event.request_hash;
    END
    $$;
`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(publishEventFunction);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION publish_event;');
}
