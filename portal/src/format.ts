export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** Event types typed as "a, b c" become ["a", "b", "c"]. */
export function parseEventTypes(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}
