/**
 * OpenMetrics exposition beside the Prometheus text format, from the same metrics.
 *
 * prom-client renders one format per registry, and renders OpenMetrics by renaming each counter in
 * place (dropping `_total`), which would break every later Prometheus-format scrape. So the
 * OpenMetrics text is rendered by a second registry whose entries only read the real metrics and
 * carry the names OpenMetrics wants; the real metrics are never touched.
 */
import { Registry, type Metric } from 'prom-client';

/** Whether an Accept header asks for OpenMetrics text (Prometheus sends it first when it scrapes). */
export function acceptsOpenMetrics(accept: string | undefined): boolean {
  return accept !== undefined && /application\/openmetrics-text/i.test(accept);
}

interface MetricReading {
  name: string;
  type: string;
  [key: string]: unknown;
}

type Reading = Promise<MetricReading> | MetricReading;
/** Histograms keep their bucket labels apart for the text formats (getForPromString). */
type Readable = { name: string; get(): Reading; getForPromString?(): Reading };

/** OpenMetrics names a counter family without `_total` and adds the suffix to its samples. */
function familyName(reading: MetricReading): string {
  return reading.type === 'counter' ? reading.name.replace(/_total$/, '') : reading.name;
}

export async function openMetricsText(source: Registry): Promise<string> {
  // The typings declare no constructor argument; the content type is prom-client's documented one.
  const view = new (Registry as unknown as new (contentType: string) => Registry)(Registry.OPENMETRICS_CONTENT_TYPE);
  for (const metric of source.getMetricsAsArray() as unknown as Readable[]) {
    const reader = {
      name: metric.name,
      async getForPromString() {
        const reading = await (metric.getForPromString ? metric.getForPromString() : metric.get());
        return { ...reading, name: familyName(reading) };
      },
    };
    view.registerMetric(reader as unknown as Metric);
  }
  return view.metrics();
}
