import type { PageProps } from '../page-props.js';

export function ReplayPage(_props: PageProps) {
  return <h1>ReplayPage</h1>;
}
