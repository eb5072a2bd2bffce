import type { PageProps } from '../page-props.js';

export function EventsPage(_props: PageProps) {
  return <h1>EventsPage</h1>;
}
