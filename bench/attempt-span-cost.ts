/**
 * Evidence for docs/performance.md ("Tracing's cost on a warm worker"): the CPU of one attempt's
 * span, made and ended as a worker makes it (src/outbound/attempt-spans.ts) and exported over
 * OTLP/HTTP to a sink in another process, with nothing else in the process. Rounds of 40,000 spans
 * over 5,000 events' stored contexts and 4 endpoints, so the first round shows what V8's compiling
 * of the tracing code costs and the later ones the steady state.
 *
 * ATTEMPT_SPAN_SAMPLER=always_off measures what tracing costs when it keeps nothing (the sampler's
 * decision, and no export). Needs nothing but Node:
 *   node --max-semi-space-size=4 --import tsx bench/attempt-span-cost.ts
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises';
import type { ClaimedDelivery } from '../src/delivery/index.js';
import { newId } from '../src/domain/ids.js';
import { startTracing, stopTracing } from '../src/infra/tracing.js';
import { AttemptTracing } from '../src/outbound/attempt-spans.js';

const perRound = 40_000;
const rounds = 6;

// The sink runs in its own process, so that only the exporting side's CPU is counted here.
const sink = spawn(
  process.execPath,
  ['-e', "const s=require('http').createServer((q,r)=>{q.resume();q.on('end',()=>r.writeHead(200).end('{}'))});s.listen(0,'127.0.0.1',()=>console.log(s.address().port))"],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const [port] = (await once(sink.stdout!, 'data')) as [Buffer];
// The OTLP exporter reads its endpoint from the process's environment, as in the platform.
Object.assign(process.env, {
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(port).trim()}`,
  OTEL_TRACES_SAMPLER: process.env.ATTEMPT_SPAN_SAMPLER ?? 'parentbased_traceidratio',
  OTEL_TRACES_SAMPLER_ARG: '1.0',
});
await startTracing(process.env, 'bench', 'worker');

const events = Array.from({ length: 5_000 }, () => ({ id: newId('event'), traceParent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01` }));
const endpoints = Array.from({ length: 4 }, (_, i) => ({ id: newId('endpoint'), url: `http://127.0.0.1:9/tracing/${i}` }));

/** The fields of a claimed delivery that its span reads; a fresh string per row, as pg returns them. */
function claimed(n: number): ClaimedDelivery {
  const event = events[n % events.length]!;
  return {
    id: newId('delivery'),
    event_id: event.id,
    event_trace_parent: Buffer.from(event.traceParent, 'latin1').toString('latin1'),
    trace_parent: null,
    attempt_count: 1,
    next_trigger: 'initial',
    endpoint: endpoints[n % endpoints.length],
  } as unknown as ClaimedDelivery;
}

for (let round = 1; round <= rounds; round++) {
  const rows = Array.from({ length: perRound }, (_, i) => claimed(i));
  const before = process.cpuUsage();
  for (let i = 0; i < perRound; i++) {
    const tracing = new AttemptTracing(rows[i]!);
    tracing.answered(Date.now(), { statusCode: 200 });
    tracing.end('success');
    // Batches go out as the processor fills them, on the event loop, as in a worker.
    if (i % 500 === 499) await yieldToLoop();
  }
  await sleep(100);
  const used = process.cpuUsage(before);
  process.stdout.write(`round ${round}: ${((used.user + used.system) / perRound).toFixed(1)} µs of CPU per attempt span (every thread)\n`);
}
await stopTracing();
sink.kill();
