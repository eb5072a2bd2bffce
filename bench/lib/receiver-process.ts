/**
 * The loopback receiver, in its own process so that it does not share an event loop with the load
 * generator or the platform. Usage: receiver-process.ts <okPorts> <hangPorts>.
 *
 * Each port is a separate origin (one endpoint each), as separate customer endpoints are. "ok" ports
 * answer 200 as soon as the request has arrived; "hang" ports read the request and never answer.
 * Every arrival is counted per port; when recording is on, the arrival time of each webhook-id is
 * kept too (latency scenario). The parent talks to it over IPC, see receiver.ts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const okPorts = Number(process.argv[2] ?? 10);
const hangPorts = Number(process.argv[3] ?? 1);

const counts: number[] = [];
let firstAt: number | undefined;
let lastAt: number | undefined;
let recording = false;
let arrivals: Array<[string, number]> = [];
const servers: Server[] = [];

async function listen(index: number, hang: boolean): Promise<number> {
  counts[index] = 0;
  const server = createServer((req, res) => {
    const at = Date.now();
    counts[index]! += 1;
    firstAt ??= at;
    lastAt = at;
    if (recording) {
      const id = req.headers['webhook-id'];
      if (typeof id === 'string') arrivals.push([id, at]);
    }
    req.resume();
    if (hang) return; // never answers: the platform's attempt timeout has to end it
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '11' }).end('{"ok":true}');
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

const ok: number[] = [];
const hang: number[] = [];
for (let i = 0; i < okPorts; i++) ok.push(await listen(i, false));
for (let i = 0; i < hangPorts; i++) hang.push(await listen(okPorts + i, true));
process.send?.({ ready: true, ok, hang });
