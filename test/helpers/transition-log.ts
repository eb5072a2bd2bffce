/**
 * A test-only record of every delivery status change, so the invariant checker can hold the SQL to
 * `TRANSITIONS` (src/domain/delivery-status.ts). Installed once in the test template database (see
 * global-setup.ts), in its own schema, so every test database records from its first row; it is
 * never a migration and never reaches a real deployment.
 */
import type { Knex } from 'knex';
import { allows, TRANSITIONS, type DeliveryStatus, type Transition } from '../../src/domain/delivery-status.js';

export const TRANSITION_LOG = 'test_transitions.log';

export async function installTransitionLog(db: Knex): Promise<void> {
  await db.raw(`
    CREATE SCHEMA IF NOT EXISTS test_transitions;
    CREATE TABLE IF NOT EXISTS ${TRANSITION_LOG} (
      delivery_id text NOT NULL,
      tenant_id text NOT NULL,
      from_status text,
      to_status text NOT NULL,
      at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE OR REPLACE FUNCTION test_transitions.record() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO ${TRANSITION_LOG} (delivery_id, tenant_id, from_status, to_status)
      VALUES (NEW.id, NEW.tenant_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status);
      RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS test_transitions_insert ON deliveries;
    DROP TRIGGER IF EXISTS test_transitions_update ON deliveries;
    CREATE TRIGGER test_transitions_insert AFTER INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION test_transitions.record();
    CREATE TRIGGER test_transitions_update AFTER UPDATE OF status ON deliveries FOR EACH ROW
      WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION test_transitions.record();
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
  /** One delivery that made it, for the report. */
  example: string;
}

/** Every distinct status change recorded (of these tenants), or undefined when nothing records them. */
export async function observedTransitions(db: Knex, tenantIds?: string[]): Promise<ObservedTransition[] | undefined> {
  const { rows: installed } = await db.raw<{ rows: Array<{ ok: boolean }> }>(`SELECT to_regclass(:log) IS NOT NULL AS ok`, { log: TRANSITION_LOG });
  if (!installed[0]?.ok) return undefined;
  const { rows } = await db.raw<{ rows: Array<{ from_status: DeliveryStatus | null; to_status: DeliveryStatus; n: number; example: string }> }>(
    `SELECT from_status, to_status, count(*)::int AS n, min(delivery_id) AS example FROM ${TRANSITION_LOG}
      ${tenantIds ? 'WHERE tenant_id = ANY(:tenants)' : ''} GROUP BY 1, 2`,
    { tenants: tenantIds ?? [] },
  );
  return rows.map((r) => ({ from: r.from_status, to: r.to_status, count: r.n, example: r.example }));
}
