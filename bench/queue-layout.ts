/**
 * Evidence for docs/architecture.md: what one BullMQ Worker per endpoint queue costs while idle.
 * Starts N workers on N empty queues and reports Redis connections, process RSS and the commands
 * per second Redis serves to keep them waiting. Run: tsx bench/queue-layout.ts 10 200
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function info(redis: Redis): Promise<{ clients: number; commands: number }> {
  const text = await redis.info();
  const field = (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(text)?.[1] ?? 0);
  return { clients: field('connected_clients'), commands: field('total_commands_processed') };
}

async function measure(n: number): Promise<void> {
  const redis = new Redis(url);
  const before = await info(redis);
  const rssBefore = process.memoryUsage().rss;
  const prefix = `qlayout${process.pid}`;
  const workers = Array.from({ length: n }, (_, i) =>
    new Worker(`ep-${i}`, async () => undefined, { connection: { url }, prefix, concurrency: 10 }),
  );
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  await new Promise((r) => setTimeout(r, 2_000));
  const settled = await info(redis);
  await new Promise((r) => setTimeout(r, 10_000));
  const after = await info(redis);
  const rss = process.memoryUsage().rss - rssBefore;
  console.log(
    JSON.stringify({
      workers: n,
      redisConnections: settled.clients - before.clients,
      rssMb: Math.round(rss / 1e6),
      idleCommandsPerSecond: Math.round((after.commands - settled.commands) / 10),
    }),
  );
  await Promise.all(workers.map((w) => w.close(true)));
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
}

for (const n of process.argv.slice(2).map(Number)) await measure(n);
process.exit(0);
