import type { PageProps } from '../page-props.js';

export function AuditPage(_props: PageProps) {
  return <h1>AuditPage</h1>;
}
