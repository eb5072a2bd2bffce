import type { Knex } from 'knex';
import { eventTypePrefix } from '../domain/event-types.js';

export type TenantTable =
  | 'sources'
  | 'endpoints'
  | 'events'
  | 'receipts'
  | 'deliveries'
  | 'attempts'
  | 'messages'
  | 'replays'
  | 'audit_log';

export type Actor =
  | { type: 'api_key'; id: string }
  | { type: 'portal_session'; id: string }
  | { type: 'admin'; id: null }
  | { type: 'system'; id: null };

/**
 * What a portal session may see and do. `endpointIds` / `eventTypes` undefined means no restriction
 * on that axis; `manage` allows writes.
 */
export interface SessionRestriction {
  sessionId: string;
  manage: boolean;
  endpointIds?: readonly string[];
  eventTypes?: readonly string[];
}

/**
 * The only way tenant routes reach tenant data: every query starts from `from(table)`, which already
 * filters by the caller's tenant, so a handler cannot forget the filter and leak another tenant's rows.
 * A portal session's restriction is applied here too, for the same reason: every list and get of
 * endpoints, deliveries, attempts, events, receipts and messages is narrowed to the session's scope.
 */
export class TenantScope {
  constructor(
    readonly db: Knex,
    readonly tenantId: string,
    readonly actor: Actor,
    readonly session?: SessionRestriction,
  ) {}

  from(table: TenantTable, alias?: string): Knex.QueryBuilder {
    const name = alias ?? table;
    const q = this.db(alias ? `${table} as ${alias}` : table).where(`${name}.tenant_id`, this.tenantId);
    if (this.session) this.restrict(q, table, name);
    return q;
  }

  /** True when a portal session narrows what this scope sees (endpoints or event types). */
  get narrowed(): boolean {
    return this.session?.endpointIds !== undefined || this.session?.eventTypes !== undefined;
  }

  private restrict(q: Knex.QueryBuilder, table: TenantTable, name: string): void {
    const { endpointIds, eventTypes } = this.session!;
    const tenantId = this.tenantId;
    const db = this.db;
    const typeMatch = (column: string) => (b: Knex.QueryBuilder) => {
      const exact = eventTypes!.filter((t) => eventTypePrefix(t) === undefined);
      const prefixes = eventTypes!.map(eventTypePrefix).filter((p): p is string => p !== undefined);
      b.whereIn(column, exact);
      for (const p of prefixes) b.orWhereRaw('starts_with(??, ?)', [column, p]);
    };
    // An event is visible when its type is in scope and it has a delivery to an endpoint in scope.
    const eventVisible = (eventIdColumn: string) => (b: Knex.QueryBuilder) => {
      b.select(db.raw('1')).from('events as scope_e').where('scope_e.tenant_id', tenantId).whereRaw('scope_e.id = ??', [eventIdColumn]);
      if (eventTypes) b.where(typeMatch('scope_e.type'));
      if (endpointIds) {
        b.whereExists((d) =>
          d.select(db.raw('1')).from('deliveries as scope_d').where('scope_d.tenant_id', tenantId).whereRaw('scope_d.event_id = scope_e.id').whereIn('scope_d.endpoint_id', endpointIds),
        );
      }
    };
    const deliveryVisible = (deliveryIdColumn: string) => (b: Knex.QueryBuilder) => {
      b.select(db.raw('1')).from('deliveries as scope_dl').where('scope_dl.tenant_id', tenantId).whereRaw('scope_dl.id = ??', [deliveryIdColumn]);
      if (endpointIds) b.whereIn('scope_dl.endpoint_id', endpointIds);
      if (eventTypes) {
        b.whereExists((e) => e.select(db.raw('1')).from('events as scope_de').where('scope_de.tenant_id', tenantId).whereRaw('scope_de.id = scope_dl.event_id').where(typeMatch('scope_de.type')));
      }
    };
    switch (table) {
      case 'endpoints':
        if (endpointIds) q.whereIn(`${name}.id`, endpointIds);
        return;
      case 'deliveries':
        q.whereExists(deliveryVisible(`${name}.id`));
        return;
      case 'attempts':
        q.whereExists(deliveryVisible(`${name}.delivery_id`));
        return;
      case 'events':
        q.whereExists(eventVisible(`${name}.id`));
        return;
      case 'receipts':
        q.whereExists(eventVisible(`${name}.event_id`));
        return;
      case 'messages':
        // A message is visible only through an event the session may see.
        q.whereExists((b) =>
          b
            .select(db.raw('1'))
            .from('events as scope_me')
            .where('scope_me.tenant_id', tenantId)
            .whereRaw('scope_me.message_id = ??', [`${name}.message_id`])
            .whereExists(eventVisible('scope_me.id')),
        );
        return;
      case 'replays':
        // A replay's filter was applied within its starter's scope, which is not stored: a narrowed
        // session cannot tell whether another's replay stayed inside its own, so it sees only its own.
        if (this.narrowed) q.where(`${name}.actor_type`, 'portal_session').where(`${name}.actor_id`, this.session!.sessionId);
        return;
      case 'audit_log': {
        // A link sees what was done to what it can see: its endpoints, their deliveries, and the
        // replays it may follow. Entries about sources, API keys, portal links and the tenant
        // belong to whoever holds an API key, never to a link.
        const col = (c: string) => `${name}.${c}`;
        const narrowedSession = this.narrowed ? this.session! : undefined;
        q.where((any) => {
          any.where((b) => {
            b.where(col('target_type'), 'endpoint');
            if (endpointIds) b.whereIn(col('target_id'), endpointIds);
          });
          any.orWhere((b) => b.where(col('target_type'), 'delivery').whereExists(deliveryVisible(col('target_id'))));
          any.orWhere((b) => {
            b.where(col('target_type'), 'replay');
            // As for replays themselves: a narrowed link follows only the replays it started.
            if (narrowedSession) b.where(col('actor_type'), 'portal_session').where(col('actor_id'), narrowedSession.sessionId);
          });
        });
        return;
      }
      case 'sources':
        // Not part of any portal view: the routes refuse sessions, and this makes sure of it.
        q.whereRaw('false');
        return;
    }
  }

  /** Runs `work` in one transaction with a scope bound to it. */
  transaction<T>(work: (scope: TenantScope, trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => work(new TenantScope(trx, this.tenantId, this.actor, this.session), trx));
  }
}
