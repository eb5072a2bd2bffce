/**
 * Per-message ordering, as a SQL condition on the delivery aliased `d`: only the head of a message's
 * line may go, and only when nothing of that message is already on its way to the endpoint. Dead or
 * succeeded releases the next. Slot hand-off uses it; admission (the SQL function `admit_due`,
 * migration 20261201000014) has it written out, and test/integration/ordering*.test.ts hold both to it.
 */
export function headOfLine(d: string, settledId?: string): string {
  // A statement that settles a delivery and picks the next one still sees the settled row in its
  // snapshot; `settledId` (an SQL expression) names it so it does not hold its own line.
  const settled = settledId ? ` AND o.id <> ${settledId}` : '';
  return `(${d}.order_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM deliveries o
     WHERE o.endpoint_id = ${d}.endpoint_id AND o.order_key = ${d}.order_key AND o.id <> ${d}.id${settled}
       AND o.status IN ('pending', 'queued', 'in_flight')
       AND (o.status <> 'pending'
            OR (COALESCE(o.order_hint, -1), o.order_seq, o.id) < (COALESCE(${d}.order_hint, -1), ${d}.order_seq, ${d}.id))))`;
}
