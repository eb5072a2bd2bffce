import type { Delivery } from '../api/client.js';
import { formatTime } from '../format.js';
import { href } from '../route.js';
import { deadReasonText } from './dead-reasons.js';

/** Deliveries as a table, each linked to its page; the attempts column where the list has them. */
export function DeliveryTable({ deliveries, label, attempts = false }: { deliveries: Delivery[]; label: string; attempts?: boolean }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={label}>
      <table>
        <thead>
          <tr>
            <th scope="col">Delivery</th>
            <th scope="col">Event type</th>
            <th scope="col">Status</th>
            {attempts && <th scope="col">Attempts</th>}
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {deliveries.map((d) => (
            <tr key={d.id}>
              <td><a href={href('delivery', d.id)}>{d.id}</a></td>
              <td>{d.eventType ?? '—'}</td>
              <td>{d.status}{d.deadReason ? ` (${deadReasonText(d.deadReason)})` : ''}</td>
              {attempts && <td>{d.attemptCount}</td>}
              <td>{formatTime(d.createdAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
