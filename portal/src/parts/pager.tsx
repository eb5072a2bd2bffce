import { href, type Page } from '../route.js';

/**
 * Newest-first paging kept in the address: the first page has no cursor, each later one the cursor
 * the previous answer gave. Nothing is shown while everything fits on one page.
 */
export function Pager(props: { page: Page; query: Record<string, string>; cursor: string; nextCursor: string | null | undefined; noun: string }) {
  const { page, query, cursor, nextCursor, noun } = props;
  if (!cursor && !nextCursor) return null;
  return (
    <nav class="pager" aria-label={`Pages of ${noun}`}>
      {cursor && <a href={href(page, '', query)}>Newest {noun}</a>}
      {nextCursor && <a href={href(page, '', { ...query, cursor: nextCursor })}>Older {noun}</a>}
    </nav>
  );
}
