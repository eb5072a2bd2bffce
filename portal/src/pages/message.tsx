import type { PageProps } from '../page-props.js';

export function MessagePage(_props: PageProps) {
  return <h1>MessagePage</h1>;
}
