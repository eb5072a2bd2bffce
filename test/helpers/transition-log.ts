/**
 * A test-only record of every delivery status change, so the invariant checker can hold the SQL to
 * `TRANSITIONS` (src/domain/delivery-status.ts). Installed once in the test template database (see
 * global-setup.ts), in its own schema, so every test database records from its first row; it is
 * never a migration and never reaches a real deployment.
 */
import type { Knex } from 'knex';
import { allows, TRANSITIONS, type DeliveryStatus, type Transition } from '../../src/domain/delivery-status.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

export const TRANSITION_LOG = 'test_transitions.log';

export async function installTransitionLog(db: Knex): Promise<void> {
  await db.raw(`
    CREATE SCHEMA IF NOT EXISTS test_transitions;
    CREATE TABLE IF NOT EXISTS ${TRANSITION_LOG} (
      delivery_id text NOT NULL,
      tenant_id uuid NOT NULL,
      from_status text,
      to_status text NOT NULL,
      at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    -- A delivery's status as a reader sees it (delivery_state): a slot's claim kept in the queue row
    -- only makes a pending delivery in flight. Row triggers of deliveries run before the queue's
    -- statement trigger (delivery_queue_changed), so the queue row still holds the old claim here.
    CREATE OR REPLACE FUNCTION test_transitions.record() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      v_from text;
    BEGIN
      IF TG_OP = 'UPDATE' THEN
        SELECT s.status INTO v_from FROM delivery_state(OLD.id, OLD.status, OLD.attempt_count) s;
        IF v_from IS NOT DISTINCT FROM NEW.status THEN
          RETURN NULL;
        END IF;
      END IF;
      INSERT INTO ${TRANSITION_LOG} (delivery_id, tenant_id, from_status, to_status) VALUES (NEW.id, NEW.tenant_id, v_from, NEW.status);
      RETURN NULL;
    END $$;
    -- A claim written to the queue row by a statement of its own (admit_due_v4, hand_off_v4): what
    -- the triggers of deliveries copy there (a deeper trigger level) is recorded above.
    CREATE OR REPLACE FUNCTION test_transitions.record_claim() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF pg_trigger_depth() = 1 THEN
        INSERT INTO ${TRANSITION_LOG} (delivery_id, tenant_id, from_status, to_status) VALUES (NEW.delivery_id, NEW.tenant_id, OLD.status, NEW.status);
      END IF;
      RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS test_transitions_insert ON deliveries;
    DROP TRIGGER IF EXISTS test_transitions_update ON deliveries;
    DROP TRIGGER IF EXISTS test_transitions_claim ON delivery_queue;
    CREATE TRIGGER test_transitions_insert AFTER INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION test_transitions.record();
    CREATE TRIGGER test_transitions_update AFTER UPDATE OF status ON deliveries FOR EACH ROW EXECUTE FUNCTION test_transitions.record();
    CREATE TRIGGER test_transitions_claim AFTER UPDATE OF status ON delivery_queue FOR EACH ROW
      WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION test_transitions.record_claim();
  `);
}

/** The transitions in TRANSITIONS that allow going from `from` (null: created) to `to`. */
export function transitionsAllowing(from: DeliveryStatus | null, to: DeliveryStatus): string[] {
  return (Object.keys(TRANSITIONS) as Transition[]).filter((name) => allows(name, from, to));
}

export interface ObservedTransition {
  from: DeliveryStatus | null;
  to: DeliveryStatus;
  count: number;
  /** One delivery that made it, for the report: its TypeID (the log keeps the stored uuid). */
  example: string;
}

/** Every distinct status change recorded (of these tenants), or undefined when nothing records them. */
export async function observedTransitions(db: Knex, tenantIds?: string[]): Promise<ObservedTransition[] | undefined> {
  const { rows: installed } = await db.raw<{ rows: Array<{ ok: boolean }> }>(`SELECT to_regclass(:log) IS NOT NULL AS ok`, { log: TRANSITION_LOG });
  if (!installed[0]?.ok) return undefined;
  const { rows } = await db.raw<{ rows: Array<{ from_status: DeliveryStatus | null; to_status: DeliveryStatus; n: number; example: string }> }>(
    `SELECT from_status, to_status, count(*)::int AS n, min(delivery_id) AS example FROM ${TRANSITION_LOG}
      ${tenantIds ? 'WHERE tenant_id = ANY(:tenants::uuid[])' : ''} GROUP BY 1, 2`,
    { tenants: (tenantIds ?? []).map((id) => uuidOf('tenant', id)) },
  );
  return rows.map((r) => ({ from: r.from_status, to: r.to_status, count: r.n, example: idOfUuid('delivery', r.example) }));
}
