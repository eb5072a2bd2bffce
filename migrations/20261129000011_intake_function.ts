import type { Knex } from 'knex';

/**
 * Accepting a callback in one database call, and one definition of fan-out.
 *
 * Intake used to be BEGIN, the event/message statement, the endpoints SELECT, the deliveries INSERT,
 * the receipt INSERT and COMMIT: six round trips during which the backend sat `idle in transaction`
 * waiting for the api process. `intake_accept` does all of it as one statement, which is atomic
 * without BEGIN/COMMIT. Publishing (`publish_event`, migration 20261129000012) uses the same
 * `fan_out_targets` and `fan_out_insert`, so which endpoints an event reaches and what their
 * deliveries look like are written down once, here.
 *
 * Ids are not made here: TypeIDs are made in the api process (they must sort by creation time, and
 * ids made in SQL were not monotonic within a millisecond), so the caller passes the event id, the
 * receipt id and an array of delivery ids. It cannot know how many endpoints match, so it passes a
 * guess; when more endpoints match than ids were given, the functions write nothing and say how many
 * they need, and the caller calls again with that many.
 */
/** intake_accept as this migration creates it (migration 20261201000016 restores it on the way down). */
export const intakeAcceptFunction = `
    -- Accepting one verified, parsed callback: the event (unique on source + dedupe key), the
    -- message's forward-only status, one delivery per matching endpoint, and the receipt, all or
    -- nothing. Called as one statement, so nothing is acknowledged before it commits.
    --
    -- outcome is 'accepted', 'duplicate', 'stale', or 'need_ids': more endpoints match
    -- (endpoint_count) than delivery ids were given, nothing was written, call again with that many.
    --
    -- The function is VOLATILE and runs under READ COMMITTED, so each statement in it takes a fresh
    -- snapshot: the duplicate lookup below sees an event a concurrent callback committed while our
    -- INSERT waited on it, as the separate SELECT after the INSERT used to.
    CREATE FUNCTION intake_accept(
      p_receipt_id text, p_event_id text, p_delivery_ids text[],
      p_tenant_id text, p_source_id text, p_origin text, p_body_digest text, p_received_at timestamptz,
      p_type text, p_message_id text, p_dedupe_key text,
      p_status text, p_status_rank integer, p_status_final boolean, p_provider_sequence bigint,
      p_body text, p_default_max_age_seconds integer,
      OUT outcome text, OUT event_id text, OUT endpoint_count integer, OUT pending integer, OUT dead_disabled integer)
    LANGUAGE plpgsql AS $$
    DECLARE
      -- Read before anything is written, so that too few ids can be answered without writing.
      v_targets fan_out_target[] := fan_out_targets(p_tenant_id, p_type);
      v_inserted text;
      v_advanced integer := 0;
    BEGIN
      endpoint_count := cardinality(v_targets);
      pending := 0;
      dead_disabled := 0;
      IF endpoint_count > cardinality(p_delivery_ids) THEN
        outcome := 'need_ids';
        RETURN;
      END IF;

      INSERT INTO events (id, tenant_id, source_id, origin, type, message_id, dedupe_key, status, status_rank,
                          provider_sequence, body, created_at)
      VALUES (p_event_id, p_tenant_id, p_source_id, p_origin, p_type, p_message_id, p_dedupe_key, p_status, p_status_rank,
              p_provider_sequence, p_body, p_received_at)
      ON CONFLICT (source_id, dedupe_key) DO NOTHING
      RETURNING id INTO v_inserted;

      IF v_inserted IS NULL THEN
        -- The same logical event was already stored (possibly by a callback that committed while we
        -- waited on its key): answer with that event, create no work.
        outcome := 'duplicate';
        SELECT e.id INTO event_id FROM events e WHERE e.source_id = p_source_id AND e.dedupe_key = p_dedupe_key;
      ELSE
        event_id := v_inserted;
        IF p_message_id IS NOT NULL THEN
          -- The message's status only moves forward: a status of lower or equal rank than the one the
          -- message has reached changes nothing. An event without a status always updates the row.
          -- Either way a row that is written stays locked until commit (see fan_out_insert).
          INSERT INTO messages AS m (tenant_id, source_id, message_id, status, status_rank, status_final, last_event_id, updated_at)
          VALUES (p_tenant_id, p_source_id, p_message_id, p_status, coalesce(p_status_rank, 0), coalesce(p_status_final, false),
                  v_inserted, now())
          ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE
             SET status = COALESCE(EXCLUDED.status, m.status),
                 status_rank = GREATEST(EXCLUDED.status_rank, m.status_rank),
                 status_final = CASE WHEN EXCLUDED.status IS NULL THEN m.status_final ELSE EXCLUDED.status_final END,
                 last_event_id = EXCLUDED.last_event_id,
                 updated_at = now()
           WHERE EXCLUDED.status IS NULL OR m.status_rank < EXCLUDED.status_rank;
          GET DIAGNOSTICS v_advanced = ROW_COUNT;
        END IF;

        IF p_status IS NOT NULL AND p_message_id IS NOT NULL AND v_advanced = 0 THEN
          -- Older than what the message already reached: kept as evidence, forwarded to nobody.
          outcome := 'stale';
          UPDATE events SET stale = true WHERE id = v_inserted;
        ELSE
          outcome := 'accepted';
          SELECT f.pending, f.dead_disabled INTO pending, dead_disabled
            FROM fan_out_insert(v_inserted, p_tenant_id, p_received_at,
                                CASE WHEN p_message_id IS NOT NULL THEN p_source_id || ':' || p_message_id END,
                                p_provider_sequence, p_default_max_age_seconds, v_targets, p_delivery_ids) f;
        END IF;
      END IF;

      INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest, received_at)
      VALUES (p_receipt_id, p_tenant_id, p_source_id, event_id, outcome, p_origin, p_body_digest, p_received_at);
    END
    $$;
`;

/** fan_out_insert as this migration creates it; migration 20261202000027 restores it on the way down. */
export const fanOutInsertFunction = `
    CREATE FUNCTION fan_out_insert(
      p_event_id text, p_tenant_id text, p_created_at timestamptz, p_message_key text, p_provider_sequence bigint,
      p_default_max_age_seconds integer, p_targets fan_out_target[], p_delivery_ids text[],
      OUT pending integer, OUT dead_disabled integer)
    LANGUAGE plpgsql AS $$
    DECLARE
      v_order_seq bigint;
    BEGIN
      IF cardinality(p_targets) > cardinality(p_delivery_ids) THEN
        RAISE EXCEPTION 'fan_out_insert: % targets but % delivery ids', cardinality(p_targets), cardinality(p_delivery_ids);
      END IF;
      IF p_message_key IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_targets) t WHERE t.per_message) THEN
        v_order_seq := nextval(pg_get_serial_sequence('events', 'seq'));
      END IF;
      INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, dead_reason, last_error, next_attempt_at,
                              deadline_at, order_key, order_hint, order_seq, created_at, updated_at)
      SELECT p_delivery_ids[t.n], p_tenant_id, p_event_id, t.endpoint_id,
             CASE WHEN t.active THEN 'pending' ELSE 'dead' END,
             CASE WHEN t.active THEN NULL ELSE 'endpoint_disabled' END,
             CASE WHEN t.active THEN NULL ELSE 'endpoint was disabled when the event was accepted' END,
             CASE WHEN t.active THEN p_created_at END,
             -- The endpoint's retryPolicy.maxEventAgeSeconds, else the platform's MAX_EVENT_AGE_SECONDS.
             p_created_at + make_interval(secs => coalesce(t.max_age_seconds, p_default_max_age_seconds)),
             CASE WHEN t.per_message AND p_message_key IS NOT NULL THEN p_message_key END,
             CASE WHEN t.per_message AND p_message_key IS NOT NULL THEN p_provider_sequence END,
             CASE WHEN t.per_message AND p_message_key IS NOT NULL THEN v_order_seq END,
             p_created_at, p_created_at
        FROM unnest(p_targets) WITH ORDINALITY AS t(endpoint_id, active, per_message, max_age_seconds, n);
      SELECT count(*) FILTER (WHERE t.active), count(*) FILTER (WHERE NOT t.active)
        INTO pending, dead_disabled
        FROM unnest(p_targets) t;
    END
    $$;
`;

/** intake_accept_many as this migration creates it; migration 20261202000027 restores it on the way down. */
export const intakeAcceptManyFunction = `
    CREATE FUNCTION intake_accept_many(p_items jsonb, p_default_max_age_seconds integer)
    RETURNS TABLE (outcome text, event_id text, endpoint_count integer, pending integer, dead_disabled integer)
    LANGUAGE plpgsql AS $$
    DECLARE
      v_item jsonb;
      v_result record;
    BEGIN
      FOR i IN 0 .. jsonb_array_length(p_items) - 1 LOOP
        v_item := p_items -> i;
        SELECT * INTO v_result
          FROM intake_accept(v_item->>'receiptId', v_item->>'eventId',
                             ARRAY(SELECT jsonb_array_elements_text(v_item->'deliveryIds')),
                             v_item->>'tenantId', v_item->>'sourceId', v_item->>'origin', v_item->>'bodyDigest',
                             (v_item->>'receivedAt')::timestamptz, v_item->>'type', v_item->>'messageId',
                             v_item->>'dedupeKey', v_item->>'status', (v_item->>'statusRank')::integer,
                             (v_item->>'statusFinal')::boolean, (v_item->>'sequence')::bigint, v_item->>'body',
                             p_default_max_age_seconds);
        outcome := v_result.outcome;
        event_id := v_result.event_id;
        endpoint_count := v_result.endpoint_count;
        pending := v_result.pending;
        dead_disabled := v_result.dead_disabled;
        RETURN NEXT;
      END LOOP;
    END
    $$;
`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    -- One endpoint an event goes to, as fan-out needs to know it.
    CREATE TYPE fan_out_target AS (endpoint_id text, active boolean, per_message boolean, max_age_seconds integer);

    -- The endpoints of the tenant whose filter matches the event type, by endpoint id (the order in
    -- which the caller's delivery ids are handed out). An empty filter means every type except
    -- operational events (platform.*): a catch-all endpoint never receives a type it did not know
    -- existed; those only reach endpoints that name them, exactly or by an \`x.*\` prefix. Disabled
    -- endpoints are included: they get a dead delivery (see fan_out_insert).
    CREATE FUNCTION fan_out_targets(p_tenant_id text, p_type text) RETURNS fan_out_target[]
    LANGUAGE sql STABLE AS $$
      SELECT coalesce(array_agg(ROW(e.id, e.status = 'active', e.ordering = 'per-message',
                                    (e.retry_policy->>'maxEventAgeSeconds')::int)::fan_out_target ORDER BY e.id),
                      '{}')
        FROM endpoints e
       WHERE e.tenant_id = p_tenant_id AND e.deleted_at IS NULL
         AND ((cardinality(e.event_types) = 0 AND NOT starts_with(p_type, 'platform.'))
              OR p_type = ANY(e.event_types)
              OR EXISTS (SELECT 1 FROM unnest(e.event_types) f WHERE right(f, 2) = '.*' AND starts_with(p_type, left(f, -1))))
    $$;

    -- One delivery per target, with the caller's ids in target order. The caller has already written
    -- the event and, when it has a message, the message's row.
    --
    -- A disabled endpoint gets a dead \`endpoint_disabled\` delivery instead of none, so what piles up
    -- while it is off can be replayed once it is back.
    --
    -- Per-message ordering: a delivery to a \`per-message\` endpoint carries its message's key, the
    -- provider's sequence when there is one (it orders before acceptance order), and the event's
    -- place in the message's acceptance order (order_seq). That place is drawn here, after the
    -- caller has written the message's row in this same transaction: the caller holds the row's lock
    -- until commit, so positions are drawn in the order in which the message's events commit, which
    -- is also the order in which its status advanced. events.seq is not: it is taken when the event
    -- row is inserted, before the lock, so a \`delivered\` callback can get a lower seq than a racing
    -- \`sent\` one that commits first (both are accepted: \`sent\` advanced the message, then
    -- \`delivered\`), and ordering by seq handed receivers \`delivered\` before \`sent\`. Positions
    -- are only compared within one message, so any increasing source does; the events.seq sequence
    -- is used because it needs no schema change.
    ${fanOutInsertFunction}
    ${intakeAcceptFunction}
    -- Many callbacks in one statement, each exactly as intake_accept takes it, in the order given
    -- (group commit: under load the api process sends the callbacks that arrived while earlier ones
    -- were being written together, and answers each only after this statement has committed).
    -- p_items is a JSON array of objects whose keys are intake_accept's parameters in camelCase.
    ${intakeAcceptManyFunction}
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION intake_accept_many;
    DROP FUNCTION intake_accept;
    DROP FUNCTION fan_out_insert;
    DROP FUNCTION fan_out_targets;
    DROP TYPE fan_out_target;
  `);
}
