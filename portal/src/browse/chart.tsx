import type { components } from '../api/schema.js';
import './browse.css';

export type Stats = components['schemas']['EndpointStats'];
type Bucket = Stats['series'][number];

const slot = 10; // viewBox units per hour
const height = 40;

export const percent = (part: number, whole: number) => (whole === 0 ? '—' : `${(Math.floor((part / whole) * 1000) / 10).toString()}%`);
export const millis = (v: number | null | undefined) => (v === null || v === undefined ? '—' : `${Math.round(v)} ms`);
const hourOf = (iso: string) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

/** One sentence for the whole window: what a glance at the charts would tell. */
export function statsSummary(s: Stats): string {
  if (s.attempts === 0) return 'No attempts in this period.';
  return `${s.attempts} attempts, ${percent(s.succeeded, s.attempts)} succeeded; latency p50 ${millis(s.latencyMs.p50)}, p95 ${millis(s.latencyMs.p95)}.`;
}

/**
 * A line through the hours that have a value; an hour without attempts breaks it, and an hour
 * alone between two such gaps is drawn as a short tick, since a line needs two points.
 */
function LatencyLine({ series, value, max, kind }: { series: Bucket[]; value: (b: Bucket) => number | null; max: number; kind: 'p50' | 'p95' }) {
  const y = (v: number) => height - (v / max) * height;
  let d = '';
  const ticks: { x: number; y: number }[] = [];
  series.forEach((b, i) => {
    const v = value(b);
    if (v === null) return;
    const before = i > 0 ? value(series[i - 1]!) : null;
    const after = i < series.length - 1 ? value(series[i + 1]!) : null;
    if (before === null && after === null) ticks.push({ x: i * slot + 1, y: y(v) });
    else d += `${before === null ? 'M' : 'L'}${(i * slot + slot / 2).toFixed(1)} ${y(v).toFixed(1)} `;
  });
  return (
    <>
      {d && <path class={kind} d={d.trim()} />}
      {ticks.map((t) => <line key={t.x} class={kind} x1={t.x} y1={t.y} x2={t.x + slot - 2} y2={t.y} />)}
    </>
  );
}

/**
 * An endpoint's hourly attempts (succeeded and failed, stacked) and latency (p50, p95) as inline
 * SVG. The drawings are hidden from assistive technology; the same numbers are in a table read in
 * their place, and the caption says the gist in words.
 */
export function StatsChart({ stats, label }: { stats: Stats; label: string }) {
  const series = stats.series;
  const width = Math.max(series.length, 1) * slot;
  const maxAttempts = Math.max(1, ...series.map((b) => b.attempts));
  const maxLatency = Math.max(1, ...series.map((b) => b.latencyMs.p95 ?? 0));
  return (
    <figure class="chart">
      <figcaption>{statsSummary(stats)}</figcaption>
      <p class="chart-title" aria-hidden="true">Attempts per hour (up to {maxAttempts})</p>
      <svg viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" aria-hidden="true" focusable="false">
        <line class="grid" x1="0" y1={height} x2={width} y2={height} />
        {series.map((b, i) => {
          const okHeight = ((b.attempts - b.failed) / maxAttempts) * height;
          const failedHeight = (b.failed / maxAttempts) * height;
          return (
            <g key={b.start}>
              <rect class="ok" x={i * slot + 1} y={height - okHeight} width={slot - 2} height={okHeight} />
              <rect class="failed" x={i * slot + 1} y={height - okHeight - failedHeight} width={slot - 2} height={failedHeight} />
            </g>
          );
        })}
      </svg>
      <p class="chart-title" aria-hidden="true">Latency per hour{maxLatency > 1 ? ` (up to ${millis(maxLatency)})` : ''}</p>
      <svg viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" aria-hidden="true" focusable="false">
        <line class="grid" x1="0" y1={height} x2={width} y2={height} />
        <LatencyLine series={series} value={(b) => b.latencyMs.p95} max={maxLatency} kind="p95" />
        <LatencyLine series={series} value={(b) => b.latencyMs.p50} max={maxLatency} kind="p50" />
      </svg>
      <p class="axis" aria-hidden="true">
        <span>{series[0] ? hourOf(series[0].start) : ''}</span>
        <span>now</span>
      </p>
      <ul class="legend" aria-hidden="true">
        <li><span class="swatch ok" />succeeded</li>
        <li><span class="swatch failed" />failed</li>
        <li><span class="swatch p50" />p50 latency</li>
        <li><span class="swatch p95" />p95 latency</li>
      </ul>
      {/* The wrapper hides it: a table grows to its content whatever width it is given. */}
      <div class="sr-only">
        <table>
          <caption>{label}, hour by hour</caption>
          <thead>
            <tr>
              <th scope="col">Hour from</th>
              <th scope="col">Attempts</th>
              <th scope="col">Failed</th>
              <th scope="col">Succeeded</th>
              <th scope="col">Latency p50</th>
              <th scope="col">Latency p95</th>
            </tr>
          </thead>
          <tbody>
            {series.map((b) => (
              <tr key={b.start}>
                <th scope="row">{hourOf(b.start)}</th>
                <td>{b.attempts}</td>
                <td>{b.failed}</td>
                <td>{percent(b.attempts - b.failed, b.attempts)}</td>
                <td>{millis(b.latencyMs.p50)}</td>
                <td>{millis(b.latencyMs.p95)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </figure>
  );
}
