import type { Knex } from 'knex';
import type pg from 'pg';
import { eventTypePrefix } from '../domain/event-types.js';
import { idPrefixes, uuidOf } from '../domain/ids.js';
import type { ReadTolerance } from '../domain/read-consistency.js';
import type { ReadReplica } from '../infra/read-replica.js';
import type { Batcher } from '../infra/batcher.js';
import { run, type Statement } from '../infra/sql.js';

/** Every table that holds a tenant's rows: reached only through a TenantScope. */
export const TENANT_TABLES = [
  'sources',
  'endpoints',
  'events',
  'receipts',
  'deliveries',
  'attempts',
  'messages',
  'replays',
  'audit_log',
  'delivery_queue',
  'api_keys',
  'portal_sessions',
] as const;

export type TenantTable = (typeof TENANT_TABLES)[number];

/**
 * Tables a scope reads and writes rows of directly. Not attempts: an attempt is reached through its
 * delivery (db/functions/delivery_attempts.sql, which also lists a first try folded into it), and
 * its tenant is its delivery's.
 */
export type RowTable = Exclude<TenantTable, 'attempts'>;

/** A table named where SQL text reads or writes one: SQL given to a scope takes its tables from it. */
const namesTenantTable = new RegExp(String.raw`\b(from|join|update|into|using)\s+(${TENANT_TABLES.join('|')})\b`, 'i');

function refuseTenantTables(sql: string): void {
  const named = namesTenantTable.exec(sql);
  if (named) throw new TypeError(`SQL given to a tenant scope names the table ${named[2]}: build it from the scope and bind it`);
}

/** Tables that hold no tenant's rows and read the same for every tenant. */
export type SharedTable = 'retention_watermarks';

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
 * The only way tenant routes reach tenant data (as Svix's `secure_find`): every query starts from
 * `from(table)`, which already filters by the caller's tenant, so a handler cannot forget the filter
 * and leak another tenant's rows. The connection itself is private: nothing built on a scope can
 * reach a table unfiltered. A portal session's restriction is applied here too, for the same reason:
 * every list and get of endpoints, deliveries, attempts, events, receipts and messages is narrowed
 * to the session's scope.
 */
export class TenantScope {
  readonly #db: Knex;
  readonly #reads?: ReadReplica;
  /** The tenant's id as its rows hold it: the uuid its TypeID encodes (docs/architecture.md, "Ids in the database"). */
  readonly #tenantKey: string;

  /**
   * `platformDb` is unscoped: only authentication, admin routes and the platform's own jobs hold one.
   * `reads` lets `forReads` move a read to the replica; a scope without it (a transaction's, a
   * job's) reads where it writes.
   */
  constructor(
    platformDb: Knex,
    readonly tenantId: string,
    readonly actor: Actor,
    readonly session?: SessionRestriction,
    reads?: ReadReplica,
  ) {
    this.#db = platformDb;
    this.#reads = reads;
    this.#tenantKey = uuidOf('tenant', tenantId);
  }

  /**
   * Runs `work` with a scope on the connection this read should use: the read replica or the
   * primary, as src/infra/read-replica.ts decides from `tolerance`, the caller and the replica's
   * health. The same tenant, actor and session restriction apply. Only for work that writes nothing.
   */
  forReads<T>(tolerance: ReadTolerance, work: (scope: TenantScope) => Promise<T>): Promise<T> {
    if (!this.#reads) return work(this);
    const canWrite = this.session === undefined || this.session.manage;
    return this.#reads.read(tolerance, { canWrite }, (db) => work(new TenantScope(db, this.tenantId, this.actor, this.session)));
  }

  /** The tenant's rows of `table`, narrowed to a portal session's view when there is one. */
  from(table: RowTable, alias?: string): Knex.QueryBuilder {
    const q = this.fromWholeTenant(table, alias);
    if (this.session) this.restrict(q, table, alias ?? table);
    return q;
  }

  /**
   * The tenant's rows of `table`, not narrowed to a portal session: only for a walk whose result is
   * narrowed by what it is joined to or filtered by afterwards (say where, at the call).
   */
  fromWholeTenant(table: RowTable, alias?: string): Knex.QueryBuilder {
    const name = alias ?? table;
    return this.#db(alias ? `${table} as ${alias}` : table).where(`${name}.tenant_id`, this.#tenantKey);
  }

  /** A table that holds no tenant's rows (see SharedTable): nothing to filter. */
  shared(table: SharedTable): Knex.QueryBuilder {
    return this.#db(table);
  }

  /** An insert into `table` whose every row belongs to this tenant (tenant_id is set here). */
  insert(table: RowTable, rows: Record<string, unknown> | Array<Record<string, unknown>>): Knex.QueryBuilder {
    const owned = (row: Record<string, unknown>) => ({ ...row, tenant_id: this.#tenantKey });
    return this.#db(table).insert(Array.isArray(rows) ? rows.map(owned) : owned(rows));
  }

  /** A column of an enclosing query or CTE, for a correlated condition. */
  ref(column: string): Knex.Ref<string, Record<string, string>> {
    return this.#db.ref(column);
  }

  /** The database's clock, for a timestamp column: the same clock every other write of the row uses. */
  now(): Knex.Raw {
    return this.#db.fn.now();
  }

  /**
   * A SQL expression to place inside a query built from this scope (a computed column, a value):
   * `:name` bindings only. Its text may name no tenant table (refused), as for `composed`.
   */
  expression(sql: string, bindings: Record<string, Knex.Value | Knex.QueryBuilder> = {}): Knex.Raw {
    refuseTenantTables(sql);
    return this.#db.raw(sql, bindings);
  }

  /**
   * Runs SQL the builder cannot write (a recursive or data-modifying CTE, a LATERAL join, a function
   * call) composed of queries built from this scope, bound as `:name`. The text itself may name no
   * tenant table (refused), and `:tenantId`, if it appears, is this scope's tenant (as its rows hold it).
   */
  async composed<R>(sql: string, bindings: Record<string, Knex.Value | Knex.QueryBuilder> = {}): Promise<R[]> {
    refuseTenantTables(sql);
    if ('tenantId' in bindings) throw new TypeError('composed SQL: :tenantId is the scope\'s own, not an argument');
    const { rows } = await this.#db.raw<{ rows: R[] }>(sql, { ...bindings, tenantId: this.#tenantKey });
    return rows;
  }

  /**
   * Runs a prepared statement (see src/infra/sql.ts) whose `:tenantId` is this scope's tenant (as its
   * rows hold it): the caller cannot pass another. A statement without `:tenantId` is refused.
   */
  run<R extends pg.QueryResultRow>(st: Statement, values: Record<string, unknown>): Promise<R[]> {
    if (!st.params.includes('tenantId')) throw new TypeError(`statement ${st.name}: a tenant's statement takes :tenantId`);
    return run<R>(this.#db, st, { ...values, tenantId: this.#tenantKey });
  }

  /**
   * Submits this tenant's item to a group commit that every tenant's callers share (see
   * src/infra/batcher.ts): `batcherFor` finds or makes the batcher of this scope's connection, and
   * the item carries this scope's tenant, never one the caller chose.
   */
  submit<I extends { tenantId: string }, O>(batcherFor: (db: Knex) => Batcher<I, O>, item: Omit<I, 'tenantId'>): Promise<O> {
    return batcherFor(this.#db).submit({ ...item, tenantId: this.tenantId } as I);
  }

  /** True when a portal session narrows what this scope sees (endpoints or event types). */
  get narrowed(): boolean {
    return this.session?.endpointIds !== undefined || this.session?.eventTypes !== undefined;
  }

  private restrict(q: Knex.QueryBuilder, table: RowTable, name: string): void {
    const { endpointIds, eventTypes } = this.session!;
    // Endpoint columns hold the uuid a TypeID encodes; the audit log's targets are TypeIDs.
    const endpointUuids = endpointIds?.map((id) => uuidOf('endpoint', id));
    const tenantId = this.#tenantKey;
    const db = this.#db;
    const typeMatch = (column: string) => (b: Knex.QueryBuilder) => {
      const exact = eventTypes!.filter((t) => eventTypePrefix(t) === undefined);
      const prefixes = eventTypes!.map(eventTypePrefix).filter((p): p is string => p !== undefined);
      b.whereIn(column, exact);
      for (const prefix of prefixes) b.orWhereRaw('starts_with(:column:, :prefix)', { column, prefix });
    };
    // An event is visible when its type is in scope and it has a delivery to an endpoint in scope.
    const eventVisible = (eventIdColumn: string) => (b: Knex.QueryBuilder) => {
      b.select(db.raw('1')).from('events as scope_e').where('scope_e.tenant_id', tenantId).where('scope_e.id', db.ref(eventIdColumn));
      if (eventTypes) b.where(typeMatch('scope_e.type'));
      if (endpointUuids) {
        b.whereExists((d) =>
          d.select(db.raw('1')).from('deliveries as scope_d').where('scope_d.tenant_id', tenantId).where('scope_d.event_id', db.ref('scope_e.id')).whereIn('scope_d.endpoint_id', endpointUuids),
        );
      }
    };
    const deliveryVisible = (deliveryId: Knex.Ref<string, object> | Knex.Raw) => (b: Knex.QueryBuilder) => {
      b.select(db.raw('1')).from('deliveries as scope_dl').where('scope_dl.tenant_id', tenantId).where('scope_dl.id', deliveryId);
      if (endpointUuids) b.whereIn('scope_dl.endpoint_id', endpointUuids);
      if (eventTypes) {
        b.whereExists((e) => e.select(db.raw('1')).from('events as scope_de').where('scope_de.tenant_id', tenantId).where('scope_de.id', db.ref('scope_dl.event_id')).where(typeMatch('scope_de.type')));
      }
    };
    switch (table) {
      case 'endpoints':
        if (endpointUuids) q.whereIn(`${name}.id`, endpointUuids);
        return;
      case 'deliveries':
        q.whereExists(deliveryVisible(db.ref(`${name}.id`)));
        return;
      case 'delivery_queue':
        q.whereExists(deliveryVisible(db.ref(`${name}.delivery_id`)));
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
            .where('scope_me.message_id', db.ref(`${name}.message_id`))
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
          // Targets are TypeIDs as the API wrote them; deliveries keep the uuid (db/functions/uuid_of.sql).
          any.orWhere((b) => b.where(col('target_type'), 'delivery').whereExists(deliveryVisible(db.raw('uuid_of(:prefix, :target:)', { prefix: idPrefixes.delivery, target: col('target_id') }))));
          any.orWhere((b) => {
            b.where(col('target_type'), 'replay');
            // As for replays themselves: a narrowed link follows only the replays it started.
            if (narrowedSession) b.where(col('actor_type'), 'portal_session').where(col('actor_id'), narrowedSession.sessionId);
          });
        });
        return;
      }
      case 'sources':
      case 'api_keys':
      case 'portal_sessions':
        // Not part of any portal view: the routes refuse sessions, and this makes sure of it.
        q.whereRaw('false');
        return;
    }
  }

  /** The scope an admin route acts in for one tenant: audited as the admin. */
  static forAdmin(platformDb: Knex, tenantId: string): TenantScope {
    return new TenantScope(platformDb, tenantId, { type: 'admin', id: null });
  }

  /** The scope the platform's own jobs read in for one tenant (a worker reading an endpoint's settings). */
  static forSystem(platformDb: Knex, tenantId: string): TenantScope {
    return new TenantScope(platformDb, tenantId, { type: 'system', id: null });
  }

  /** Runs `work` in one transaction with a scope bound to it. */
  transaction<T>(work: (scope: TenantScope) => Promise<T>, config?: Knex.TransactionConfig): Promise<T> {
    return this.#db.transaction((trx) => work(new TenantScope(trx, this.tenantId, this.actor, this.session)), config);
  }

  /**
   * Runs reads that must agree with each other in one snapshot (a read-only, repeatable-read
   * transaction): a delivery read before its success commits and its attempts read after showed a
   * recorded success on a delivery still in flight.
   */
  snapshot<T>(work: (scope: TenantScope) => Promise<T>): Promise<T> {
    return this.transaction(work, { isolationLevel: 'repeatable read', readOnly: true });
  }

  /**
   * As `transaction`, also handing over the transaction itself, unscoped, for the delivery
   * lifecycle's statements (they take ids this scope has already found). The name says what it is.
   */
  transactionWithPlatformDb<T>(work: (scope: TenantScope, platformTrx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.#db.transaction((trx) => work(new TenantScope(trx, this.tenantId, this.actor, this.session), trx));
  }
}
