/**
 * The intake floor: the least any durable HTTP intake on this machine can do per request. A bare
 * express route that reads the raw body and does one single-row INSERT into the same PostgreSQL
 * through a pg pool of the platform's default size (DB_POOL_MAX 20), then answers 200.
 * Usage: floor-intake-process.ts <port> <databaseUrl>
 */
import express from 'express';
import pg from 'pg';

const port = Number(process.argv[2]);
const databaseUrl = process.argv[3]!;
const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
await pool.query('CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, body text NOT NULL, received_at timestamptz NOT NULL DEFAULT now())');

const app = express();
app.post('/floor', express.raw({ type: () => true, limit: '1mb' }), async (req, res) => {
  try {
    await pool.query('INSERT INTO bench_floor (body) VALUES ($1)', [(req.body as Buffer).toString('utf8')]);
    res.status(200).json({ status: 'accepted' });
  } catch {
    res.status(503).json({ status: 'unavailable' });
  }
});
app.get('/healthz', (_req, res) => {
  res.status(200).json({ ok: true });
});
const server = app.listen(port, '127.0.0.1');
server.keepAliveTimeout = 5_000;
process.on('SIGTERM', () => {
  server.close();
  void pool.end().then(() => process.exit(0));
});
