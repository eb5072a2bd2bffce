import type { Session } from '../session.js';

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/**
 * What this link may see and do, in the header: a read-only badge, and the endpoints or event
 * types it is limited to. Nothing when the link can manage the whole tenant.
 */
export function ScopeBadges({ session, canManage }: { session: Session; canManage: boolean }) {
  const badges: { key: string; text: string; title: string }[] = [];
  if (!canManage) badges.push({ key: 'read', text: 'Read-only', title: 'This link can look, not change anything' });
  if (session.endpointIds.length > 0) {
    badges.push({ key: 'endpoints', text: plural(session.endpointIds.length, 'endpoint'), title: 'This link shows only these endpoints and their deliveries' });
  }
  if (session.eventTypes.length > 0) {
    badges.push({ key: 'types', text: `Event types: ${session.eventTypes.join(', ')}`, title: 'This link shows only events and deliveries of these types' });
  }
  if (badges.length === 0) return null;
  return (
    <ul class="scope" aria-label="This link’s access">
      {badges.map((b) => (
        <li key={b.key} class="badge" title={b.title} data-scope={b.key}>{b.text}</li>
      ))}
    </ul>
  );
}

/** Said where a write control would be, so a read-only visitor knows why there is none. */
export function ReadOnlyNote({ what }: { what: string }) {
  return <p class="note" data-read-only>This link is read-only: {what} needs a link that can manage.</p>;
}

/** True when the session is limited to some endpoints or event types. */
export const isNarrowed = (session: Session) => session.endpointIds.length > 0 || session.eventTypes.length > 0;
