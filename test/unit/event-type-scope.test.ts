import { describe, expect, it } from 'vitest';
import { matchesEventType, typeFiltersWithin } from '../../src/domain/event-types.js';

describe('typeFiltersWithin: whether every type some filters take is taken by a scope too', () => {
  const cases: Array<[string[], string[], boolean]> = [
    [['order.created'], ['order.created'], true],
    [['order.created'], ['order.*'], true],
    [['order.item.*'], ['order.*'], true],
    [['order.*'], ['order.*'], true],
    [['order.created', 'invoice.paid'], ['order.*', 'invoice.*'], true],
    [['order.*'], ['order.created'], false], // order.updated is not in the scope
    [['order'], ['order.*'], false], // order.* takes order.x, not order itself
    [['orders.created'], ['order.*'], false],
    [['order.created', 'payroll.run'], ['order.*'], false],
    [[], ['order.*'], false], // no filters: every type
    [[], [], true],
    [['payroll.run'], [], true], // an empty scope is no limit
  ];
  it.each(cases)('%j within %j: %s', (filters, scope, within) => {
    expect(typeFiltersWithin(filters, scope)).toBe(within);
  });

  it('agrees with matching: a type taken by filters within a scope is taken by the scope', () => {
    const types = ['order', 'order.created', 'order.item.added', 'orders.x', 'invoice.paid', 'payroll.run'];
    const filters = [['order.created'], ['order.item.*'], ['order.*'], ['invoice.*', 'order.created'], ['payroll.run']];
    const scopes = [['order.*'], ['order.created'], ['invoice.*', 'order.*'], ['payroll.*']];
    for (const f of filters) {
      for (const s of scopes) {
        if (!typeFiltersWithin(f, s)) continue;
        for (const type of types) if (matchesEventType(f, type)) expect({ f, s, type, taken: matchesEventType(s, type) }).toEqual({ f, s, type, taken: true });
      }
    }
  });
});
