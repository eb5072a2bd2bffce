import type { PageProps } from '../page-props.js';

export function ReplaysPage(_props: PageProps) {
  return <h1>ReplaysPage</h1>;
}
