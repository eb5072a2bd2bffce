/**
 * The dispatch floor: a raw undici POST loop with no queue, no database and no logging. Each of
 * `perUrl` loops per receiver URL sends the next request as soon as the previous one answered.
 * Usage: floor-dispatch-process.ts '<json {urls, perUrl, seconds, warmupSeconds, body}>'
 * Prints one JSON line: {rps, ok, failed, cpuMsPerRequest} (this process's own CPU during the window).
 */
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';

interface FloorArgs {
  urls: string[];
  perUrl: number;
  seconds: number;
  warmupSeconds: number;
  body: string;
}

const args = JSON.parse(process.argv[2]!) as FloorArgs;
const agent = new Agent({ keepAliveTimeout: 4_000 });
// Headers of the same size as the platform's (Standard Webhooks signature, ids, attempt number).
const headers = {
  'content-type': 'application/json',
  'user-agent': 'webhook-relay/1.0',
  'webhook-id': 'evt_01jdxxxxxxxxxxxxxxxxxxxxxx',
  'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
  'webhook-signature': `v1,${'A'.repeat(43)}=`,
  'webhook-delivery-id': 'dlv_01jdxxxxxxxxxxxxxxxxxxxxxx',
  'webhook-attempt': '1',
  'webhook-replay': 'false',
};

let counting = false;
let ok = 0;
let failed = 0;
let stop = false;

async function loop(url: string): Promise<void> {
  while (!stop) {
    try {
      const res = await request(url, { method: 'POST', headers, body: args.body, dispatcher: agent });
      await res.body.dump();
      if (counting) {
        if (res.statusCode >= 200 && res.statusCode < 300) ok++;
        else failed++;
      }
    } catch {
      if (counting) failed++;
    }
  }
}

const loops = args.urls.flatMap((url) => Array.from({ length: args.perUrl }, () => loop(url)));
await new Promise((r) => setTimeout(r, args.warmupSeconds * 1000));
counting = true;
const started = performance.now();
const cpuBefore = process.cpuUsage();
await new Promise((r) => setTimeout(r, args.seconds * 1000));
counting = false;
const cpu = process.cpuUsage(cpuBefore);
const elapsed = (performance.now() - started) / 1000;
stop = true;
await Promise.all(loops);
await agent.close();
const cpuMsPerRequest = (cpu.user + cpu.system) / 1000 / Math.max(1, ok);
process.stdout.write(`${JSON.stringify({ rps: ok / elapsed, ok, failed, cpuMsPerRequest })}\n`);
process.exit(0);
