/**
 * The loopback receiver, in its own process so that it does not share an event loop with the load
 * generator or the platform. Usage: receiver-process.ts <okPorts> <hangPorts> [flakyPorts].
 *
 * Each port is a separate origin (one endpoint each), as separate customer endpoints are. "ok" ports
 * answer 200 as soon as the request has arrived; "hang" ports read the request and never answer;
 * "flaky" ports answer like ok ports except every tenth request of the port (#10, #20, … counted
 * since the last reset), which gets a 500. Every arrival is counted per port; when recording is on,
 * the arrival time of each webhook-id and the status it was answered with are kept too. The parent
 * talks to it over IPC, see receiver.ts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { epochMs } from './clock.js';

const okPorts = Number(process.argv[2] ?? 10);
const hangPorts = Number(process.argv[3] ?? 1);
const flakyPorts = Number(process.argv[4] ?? 0);
const flakyFailEvery = 10;

type PortKind = 'ok' | 'hang' | 'flaky';

const counts: number[] = [];
let firstAt: number | undefined;
let lastAt: number | undefined;
let recording = false;
/** [webhook-id, epoch ms at arrival, status answered (0: never answered)] */
let arrivals: Array<[string, number, number]> = [];
const servers: Server[] = [];

async function listen(index: number, kind: PortKind): Promise<number> {
  counts[index] = 0;
  const server = createServer((req, res) => {
    const at = epochMs();
    const n = (counts[index]! += 1);
    firstAt ??= at;
    lastAt = at;
    const status = kind === 'hang' ? 0 : kind === 'flaky' && n % flakyFailEvery === 0 ? 500 : 200;
    if (recording) {
      const id = req.headers['webhook-id'];
      if (typeof id === 'string') arrivals.push([id, at, status]);
    }
    req.resume();
    if (status === 0) return; // never answers: the platform's attempt timeout has to end it
    const body = status === 200 ? '{"ok":true}' : '{"ok":false}';
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(body.length) }).end(body);
    });
  });
  // Long enough for hung attempts to be ended by the client, not by this server.
  server.requestTimeout = 0;
  server.keepAliveTimeout = 5_000;
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

type Command =
  | { id: number; cmd: 'counts' }
  | { id: number; cmd: 'reset' }
  | { id: number; cmd: 'record'; on: boolean }
  | { id: number; cmd: 'arrivals' };

process.on('message', (message: Command) => {
  const reply = (body: unknown) => process.send?.({ id: message.id, body });
  switch (message.cmd) {
    case 'counts':
      return reply({ counts, firstAt: firstAt ?? null, lastAt: lastAt ?? null });
    case 'reset':
      counts.fill(0);
      firstAt = undefined;
      lastAt = undefined;
      arrivals = [];
      for (const server of servers) server.closeIdleConnections();
      return reply(true);
    case 'record':
      recording = message.on;
      return reply(true);
    case 'arrivals': {
      const out = arrivals;
      arrivals = [];
      return reply(out);
    }
  }
});

process.on('disconnect', () => process.exit(0));

const ports = (first: number, n: number, kind: PortKind) => Promise.all(Array.from({ length: n }, (_, i) => listen(first + i, kind)));
// Port indexes, as `counts` reports them: ok ports, then hang ports, then flaky ports.
const ok = await ports(0, okPorts, 'ok');
const hang = await ports(okPorts, hangPorts, 'hang');
const flaky = await ports(okPorts + hangPorts, flakyPorts, 'flaky');
process.send?.({ ready: true, ok, hang, flaky });
