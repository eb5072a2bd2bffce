/** Which aggregation operator a metric is wrapped in, at each place a PromQL expression uses it. */

const AGGREGATIONS = new Set(['sum', 'avg', 'min', 'max', 'count', 'group', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values']);

/**
 * For every occurrence of `metric` in `expr`, the innermost enclosing aggregation operator
 * (`sum`, `max`, ...) or `none` when it is not aggregated at all. Functions in between
 * (`deriv(...)`, `rate(...)`) are looked through; `by (...)`/`without (...)` clauses are understood
 * on either side of the argument list.
 */
export function aggregationsOf(expr: string, metric: string): string[] {
  const found: string[] = [];
  const pattern = new RegExp(`(?<![a-zA-Z0-9_:])${metric}(?![a-zA-Z0-9_:])`, 'g');
  for (const match of expr.matchAll(pattern)) found.push(enclosing(expr, match.index));
  return found;
}

function enclosing(expr: string, index: number): string {
  let depth = 0;
  for (let i = index - 1; i >= 0; i--) {
    const c = expr[i];
    if (c === ')') depth++;
    else if (c === '(') {
      if (depth > 0) {
        depth--;
        continue;
      }
      // An opening parenthesis around the metric: is it the argument list of an aggregation?
      const head = /([a-z_]+)\s*(?:(?:by|without)\s*\([^()]*\)\s*)?$/.exec(expr.slice(0, i));
      if (head && AGGREGATIONS.has(head[1]!)) return head[1]!;
    }
  }
  return 'none';
}
