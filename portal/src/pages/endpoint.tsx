import type { PageProps } from '../page-props.js';

export function EndpointPage(_props: PageProps) {
  return <h1>EndpointPage</h1>;
}
