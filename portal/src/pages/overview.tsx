import type { PageProps } from '../page-props.js';

export function OverviewPage(_props: PageProps) {
  return <h1>Overview</h1>;
}
