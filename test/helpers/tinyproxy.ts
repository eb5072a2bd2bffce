// A real forward proxy for egress tests: Debian's tinyproxy (installed by .ci/run), in the
// foreground on a loopback port, with a config file and log written here. It can be killed and
// started again on the same port, as an operator's proxy would go down and come back.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { closedPort } from './dispatch.js';
import { eventually } from './platform.js';

export interface TinyproxyOptions {
  /** Ports CONNECT may reach (tinyproxy refuses CONNECT to any other with 403). */
  connectPorts?: number[];
  /** Require Proxy-Authorization: Basic (tinyproxy answers 407 without it). */
  basicAuth?: { user: string; password: string };
}

export interface Tinyproxy {
  port: number;
  /** http://127.0.0.1:port, without credentials. */
  url: string;
  /** What tinyproxy logged so far (connections and request lines). */
  log(): string;
  /** SIGKILL: the proxy vanishes mid-run, its connections with it. */
  kill(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

export async function startTinyproxy(opts: TinyproxyOptions = {}): Promise<Tinyproxy> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tinyproxy-'));
  const logFile = path.join(dir, 'tinyproxy.log');
  const port = await closedPort();
  const lines = [
    `Port ${port}`,
    'Listen 127.0.0.1',
    'Timeout 30',
    'Allow 127.0.0.1',
    'MaxClients 200',
    `LogFile "${logFile}"`,
    'LogLevel Connect',
    ...(opts.connectPorts ?? []).map((p) => `ConnectPort ${p}`),
    ...(opts.basicAuth ? [`BasicAuth ${opts.basicAuth.user} ${opts.basicAuth.password}`] : []),
  ];
  // Without any ConnectPort line tinyproxy allows CONNECT to every port; one unused port keeps it closed.
  if (!opts.connectPorts?.length) lines.push('ConnectPort 1');
  writeFileSync(path.join(dir, 'tinyproxy.conf'), `${lines.join('\n')}\n`);

  let child: ChildProcess | undefined;
  const start = async () => {
    // -d: stay in the foreground (no daemon), so the test owns the process.
    child = spawn('tinyproxy', ['-d', '-c', path.join(dir, 'tinyproxy.conf')], { stdio: 'ignore' });
    await eventually(() => accepts(port), `tinyproxy listening on ${port}`, 10_000);
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = once(c, 'exit');
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    log: () => {
      try {
        return readFileSync(logFile, 'utf8');
      } catch {
        return '';
      }
    },
    kill,
    start,
    close: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
