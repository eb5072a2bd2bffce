import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * /openapi.json as the tools people point at it see it: Redocly's recommended ruleset finds nothing
 * to complain about, and openapi-typescript turns it into types that a client compiles against,
 * calling operations by their operationId. The compiled client then runs against this server, so
 * the types are checked against real answers too.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const redoclyCli = join(root, 'node_modules/@redocly/cli/bin/cli.js');

/** What `npx openapi-typescript openapi.json -o api.d.ts` writes, through its Node API (same code, no second process). */
async function generateTypes(dir: string): Promise<string> {
  const types = astToString(await openapiTS(pathToFileURL(join(dir, 'openapi.json'))));
  writeFileSync(join(dir, 'api.d.ts'), types);
  return types;
}

function run(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    // No telemetry or update check: the tools must work offline, as CI does.
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
    const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/**
 * A small client written the way a user would against the generated types: each call names its
 * operation by operationId and takes its request and response types from `operations`. With an
 * `operations` that lacks them (a document without operationIds gives `Record<string, never>`),
 * none of this compiles.
 */
const clientSource = `
import type { operations } from './api.js';

type Op = keyof operations;
type Json<O extends Op, S extends keyof operations[O]['responses']> = operations[O]['responses'][S] extends { content: { 'application/json': infer T } } ? T : never;
type Body<O extends Op> = operations[O] extends { requestBody: { content: { 'application/json': infer T } } } ? T : never;
type Query<O extends Op> = NonNullable<operations[O]['parameters']['query']>;
type Headers<O extends Op> = NonNullable<operations[O]['parameters']['header']>;

async function send(base: string, token: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: 'Bearer ' + token, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? null : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}
const query = (q: Record<string, string | number | undefined>) =>
  '?' + Object.entries(q).flatMap(([k, v]) => (v === undefined ? [] : [k + '=' + encodeURIComponent(String(v))])).join('&');

export async function run(base: string, adminToken: string) {
  const tenantBody: Body<'createTenant'> = { name: 'typed client' };
  const tenant = (await send(base, adminToken, 'POST', '/admin/tenants', tenantBody)).body as Json<'createTenant', 201>;
  const key: string = tenant.apiKey;

  const endpointBody: Body<'createEndpoint'> = { url: 'http://127.0.0.1:9/hook', eventTypes: ['order.*'], retryPolicy: { maxAttempts: 3 } };
  const endpoint = (await send(base, key, 'POST', '/v1/endpoints', endpointBody)).body as Json<'createEndpoint', 201>;
  const secret: string | undefined = endpoint.secret;

  const invalid = (await send(base, key, 'POST', '/v1/endpoints', { maxConcurrency: 0 })).body as Json<'createEndpoint', 400>;
  const problems: string[] = (invalid.error.details ?? []).map((d) => d.path);

  const event: Body<'publishEvent'> = { type: 'order.created', messageId: 'o-1', data: { total: 12 } };
  const idempotency: Headers<'publishEvent'> = { 'Idempotency-Key': 'typed-1' };
  const first = await send(base, key, 'POST', '/v1/events', event, idempotency as Record<string, string>);
  const published = first.body as Json<'publishEvent', 202>;
  const again = (await send(base, key, 'POST', '/v1/events', event, idempotency as Record<string, string>)).body as Json<'publishEvent', 200>;

  const search: Query<'listEvents'> = { type: 'order.*', limit: 10 };
  const page = (await send(base, key, 'GET', '/v1/events' + query(search))).body as Json<'listEvents', 200>;
  const detail = (await send(base, key, 'GET', '/v1/events/' + published.id)).body as Json<'getEvent', 200>;

  const replay: Body<'replayDeliveries'> = { filter: { eventType: 'order.*', status: 'dead' }, reason: 'typed dry run', dryRun: true };
  const dryRun = (await send(base, key, 'POST', '/v1/replays', replay)).body as Json<'replayDeliveries', 200>;

  return {
    endpointId: endpoint.id,
    hasSecret: typeof secret === 'string',
    problems,
    firstStatus: first.status,
    publishedId: published.id,
    againId: again.id,
    duplicate: again.duplicate,
    pageIds: page.data.map((e) => e.id),
    nextCursor: page.nextCursor,
    deliveries: (detail.deliveries ?? []).map((d) => d.endpointId),
    dryRunCount: dryRun.count,
  };
}
`;

/** Compiles the client against the generated types with strict settings; returns the diagnostics. */
function compile(dir: string): string[] {
  const program = ts.createProgram([join(dir, 'client.ts')], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    types: [],
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    skipLibCheck: true, // the standard library is not what is under test; the generated types are used, so checked
    outDir: dir,
  });
  const emitted = program.emit();
  return [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics].map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

describe('OpenAPI document in the hands of tools', () => {
  let t: TestPlatform;
  let dir: string;
  let document: { paths: Record<string, Record<string, { operationId?: string }>> };

  beforeAll(async () => {
    t = await startTestPlatform({ role: 'api' });
    dir = mkdtempSync(join(tmpdir(), 'whr-openapi-'));
    const res = await t.call('GET', '/openapi.json');
    expect(res.status).toBe(200);
    document = res.body;
    writeFileSync(join(dir, 'openapi.json'), res.text);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  });
  afterAll(async () => {
    await t?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('passes `redocly lint` with the recommended ruleset: 0 errors, 0 warnings', async () => {
    const result = await run([redoclyCli, 'lint', 'openapi.json', '--format=json'], dir);
    const report = JSON.parse(result.stdout) as { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string; location: unknown }> };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message} ${JSON.stringify(p.location)}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(result.code).toBe(0);
  }, 60_000);

  it('generates types with openapi-typescript whose operations name every operation, and a typed client compiles and runs', async () => {
    const types = await generateTypes(dir);
    const operationIds = Object.values(document.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(operationIds.length).toBeGreaterThan(20);
    for (const id of operationIds) expect(types, `${id} in operations`).toContain(`    ${id!}: {`);
    expect(types).not.toMatch(/export type operations = Record<string, never>/);

    writeFileSync(join(dir, 'client.ts'), clientSource);
    expect(compile(dir)).toEqual([]);

    const client = (await import(pathToFileURL(join(dir, 'client.js')).href)) as { run(base: string, adminToken: string): Promise<Record<string, unknown>> };
    const result = await client.run(t.url, t.config.adminToken);
    expect(result).toMatchObject({
      endpointId: expect.stringMatching(/^ep_/),
      hasSecret: true,
      problems: ['url', 'maxConcurrency'],
      firstStatus: 202,
      publishedId: expect.stringMatching(/^evt_/),
      duplicate: true,
      nextCursor: null,
      dryRunCount: 0,
    });
    expect(result.againId).toBe(result.publishedId);
    expect(result.pageIds).toEqual([result.publishedId]);
    expect(result.deliveries).toEqual([result.endpointId]);
  }, 120_000);

  it('control: the same client does not compile against a document without operationIds', async () => {
    const control = join(dir, 'control');
    const stripped = JSON.parse(JSON.stringify(document)) as typeof document;
    for (const ops of Object.values(stripped.paths)) for (const op of Object.values(ops)) delete op.operationId;
    mkdirSync(control);
    writeFileSync(join(control, 'openapi.json'), JSON.stringify(stripped));
    writeFileSync(join(control, 'package.json'), JSON.stringify({ type: 'module' }));
    expect(await generateTypes(control)).toMatch(/export type operations = Record<string, never>/);
    writeFileSync(join(control, 'client.ts'), clientSource);
    // Failing for the reason under test: the operations and their types are gone, not a typo.
    const diagnostics = compile(control);
    expect(diagnostics).toContain("'tenant' is of type 'unknown'.");
    expect(diagnostics).toContain("Type '{ 'Idempotency-Key': string; }' is not assignable to type 'never'.");
  }, 120_000);
});
