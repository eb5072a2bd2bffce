import type { Knex } from 'knex';

export type TenantTable =
  | 'sources'
  | 'endpoints'
  | 'events'
  | 'receipts'
  | 'deliveries'
  | 'attempts'
  | 'messages'
  | 'audit_log';

export type Actor = { type: 'api_key'; id: string } | { type: 'admin'; id: null } | { type: 'system'; id: null };

/**
 * The only way tenant routes reach tenant data: every query starts from `from(table)`, which already
 * filters by the caller's tenant, so a handler cannot forget the filter and leak another tenant's rows.
 */
export class TenantScope {
  constructor(
    readonly db: Knex,
    readonly tenantId: string,
    readonly actor: Actor,
  ) {}

  from(table: TenantTable, alias?: string): Knex.QueryBuilder {
    const name = alias ?? table;
    return this.db(alias ? `${table} as ${alias}` : table).where(`${name}.tenant_id`, this.tenantId);
  }

  /** Runs `work` in one transaction with a scope bound to it. */
  transaction<T>(work: (scope: TenantScope, trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => work(new TenantScope(trx, this.tenantId, this.actor), trx));
  }
}
