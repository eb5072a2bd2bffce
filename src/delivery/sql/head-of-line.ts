/**
 * Per-message ordering, as a SQL condition on a row of `delivery_queue` aliased `q`: only the head
 * of a message's line may go, and only when nothing of that message is already on its way to the
 * endpoint. Dead or succeeded releases the next (the queue holds only unfinished deliveries). Slot
 * hand-off uses it; admission (the SQL function `admit_due`, db/functions/admit_due.sql) has it
 * written out, and test/integration/ordering*.test.ts hold both to it.
 */
export function headOfLine(q: string, settledId?: string): string {
  // A statement that settles a delivery and picks the next one still sees the settled row in its
  // snapshot; `settledId` (an SQL expression) names it so it does not hold its own line.
  const settled = settledId ? ` AND o.delivery_id <> ${settledId}` : '';
  return `(${q}.order_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM delivery_queue o
     WHERE o.endpoint_id = ${q}.endpoint_id AND o.order_key = ${q}.order_key AND o.delivery_id <> ${q}.delivery_id${settled}
       AND (o.status <> 'pending'
            OR (COALESCE(o.order_hint, -1), o.order_seq, o.delivery_id) < (COALESCE(${q}.order_hint, -1), ${q}.order_seq, ${q}.delivery_id))))`;
}
