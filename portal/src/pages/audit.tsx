import type { PageProps } from '../page-props.js';

/**
 * The audit log is not served to portal links (GET /v1/audit-log refuses every session): it records
 * changes to sources, API keys and portal links, which no link may see. The navigation leaves this
 * page out; an address typed by hand lands here and is told so.
 */
export function AuditPage(_props: PageProps) {
  return (
    <>
      <h1>Audit log</h1>
      <p role="status">The audit log is not available through a portal link.</p>
      <p>It records changes to sources, API keys and portal links as well as to endpoints, so it is read with an API key: ask the people who gave you this link.</p>
    </>
  );
}
