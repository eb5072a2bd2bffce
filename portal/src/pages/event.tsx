import type { PageProps } from '../page-props.js';

export function EventPage(_props: PageProps) {
  return <h1>EventPage</h1>;
}
