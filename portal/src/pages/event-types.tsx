import type { PageProps } from '../page-props.js';

export function EventTypesPage(_props: PageProps) {
  return <h1>EventTypesPage</h1>;
}
