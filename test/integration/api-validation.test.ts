import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { expectError } from '../helpers/api.js';
import { createSource, postCallback, sign } from '../helpers/intake.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';

/**
 * What a client sees when a request is wrong: non-JSON bodies are 415, a body that is JSON but not
 * an object says so, every problem of a request is listed at once (body, query and headers
 * together), and unknown query parameters are refused like unknown body fields.
 */
describe('request validation', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  const url = 'http://127.0.0.1:9/hook'; // never contacted: no events are published to these endpoints

  beforeAll(async () => {
    t = await startTestPlatform({ role: 'api' });
    tenant = await t.createTenant('validation');
  });
  afterAll(async () => {
    await t?.stop();
  });

  // Rows name their tenant by the uuid its TypeID encodes.
  const endpoints = () => t.platform.db('endpoints').where({ tenant_id: uuidOf('tenant', tenant.id) }).count({ n: '*' }).then((r) => Number(r[0]!.n));
  const raw = (method: string, path: string, rawBody: string, headers: Record<string, string>, token = tenant.apiKey) =>
    t.call(method, path, { token, rawBody, headers });

  describe('415 unsupported_media_type for a body that is not JSON', () => {
    const json = JSON.stringify({ url });
    it.each([
      ['text/plain', json],
      ['text/plain;charset=UTF-8', json], // what fetch() sends for a string body without headers
      ['application/x-www-form-urlencoded', `url=${encodeURIComponent(url)}`],
      ['multipart/form-data; boundary=x', `--x\r\nContent-Disposition: form-data; name="url"\r\n\r\n${url}\r\n--x--\r\n`],
      ['application/xml', '<endpoint/>'],
    ])('POST /v1/endpoints with %s: 415, nothing created', async (type, body) => {
      const before = await endpoints();
      const res = await raw('POST', '/v1/endpoints', body, { 'content-type': type });
      expectError(res, 415, 'unsupported_media_type');
      expect(res.body.error.message).toContain('application/json');
      expect(await endpoints()).toBe(before);
    });

    it('a body without any Content-Type is 415 too', async () => {
      const res = await fetch(`${t.url}/v1/endpoints`, { method: 'POST', headers: { authorization: `Bearer ${tenant.apiKey}` }, body: Buffer.from(JSON.stringify({ url })) });
      expect(res.status).toBe(415);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unsupported_media_type');
    });

    it('admin routes answer 415 the same way', async () => {
      const res = await raw('POST', '/admin/tenants', JSON.stringify({ name: 'plain' }), { 'content-type': 'text/plain' }, t.config.adminToken);
      expectError(res, 415, 'unsupported_media_type');
      expect(await t.platform.db('tenants').where({ name: 'plain' })).toHaveLength(0);
    });

    it('accepts application/json with parameters in any case, and +json types', async () => {
      const created = await raw('POST', '/v1/endpoints', JSON.stringify({ url }), { 'content-type': 'Application/JSON; charset=utf-8' });
      expect(created.status, created.text).toBe(201);
      const patched = await raw('PATCH', `/v1/endpoints/${created.body.id}`, JSON.stringify({ description: 'merge' }), { 'content-type': 'application/merge-patch+json' });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body.description).toBe('merge');
    });

    it('provider callbacks keep their raw-body handling: a signed body is verified whatever its Content-Type', async () => {
      const source = await createSource(tenant, 'momo-communication');
      const body = communication.messageStatus('m-plain', 'sent');
      const cb = sign.communication(source.secret, body);
      const res = await postCallback(t, source.id, { ...cb, headers: { ...cb.headers, 'content-type': 'text/plain' } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.status).toBe('accepted');
    });
  });

  describe('a body that is JSON but not an object', () => {
    it.each(['null', '[]', '"url"', '42', 'true'])('%s answers 400 validation_failed "body must be a JSON object"', async (body) => {
      const res = await raw('POST', '/v1/endpoints', body, { 'content-type': 'application/json' });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error).toEqual({ code: 'validation_failed', message: 'body: body must be a JSON object', details: [{ path: 'body', message: 'body must be a JSON object' }] });
    });

    it('no body at all says a JSON object is required', async () => {
      const res = await tenant.call('POST', '/v1/replays');
      expect(res.body.error).toEqual({ code: 'validation_failed', message: 'body: a JSON object is required', details: [{ path: 'body', message: 'a JSON object is required' }] });
    });

    it('text that is not JSON at all is still malformed_json', async () => {
      expectError(await raw('POST', '/v1/endpoints', '{"url":', { 'content-type': 'application/json' }), 400, 'malformed_json');
    });
  });

  describe('every problem at once', () => {
    it('lists each invalid, missing and unknown field of a body in details, and summarises them in the message', async () => {
      const before = await endpoints();
      const res = await tenant.call('POST', '/v1/endpoints', { body: { maxConcurrency: 0, retryPolicy: { maxAttempts: 0, extra: 1 }, eventTypes: ['ok.*', 'bad type'], colour: 'red' } });
      expectError(res, 400, 'validation_failed');
      const details = res.body.error.details as Array<{ path: string; message: string }>;
      expect(details.map((d) => d.path).sort()).toEqual(['colour', 'eventTypes.1', 'maxConcurrency', 'retryPolicy.extra', 'retryPolicy.maxAttempts', 'url']);
      expect(details).toContainEqual({ path: 'url', message: 'required' });
      expect(details).toContainEqual({ path: 'colour', message: 'unknown field' });
      expect(details).toContainEqual({ path: 'eventTypes.1', message: 'must be an event type, optionally ending in .*' });
      expect(res.body.error.message).toMatch(/^6 problems: /);
      for (const d of details) expect(res.body.error.message).toContain(`${d.path}: ${d.message}`);
      expect(await endpoints()).toBe(before);
    });

    it('reports query, header and body problems of one request together', async () => {
      const res = await tenant.call('POST', '/v1/events?dryRun=true', { body: { type: 'bad type!' }, headers: { 'idempotency-key': 'platform.mine' } });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual(
        expect.arrayContaining([
          { path: 'dryRun', message: 'unknown query parameter' },
          { path: 'Idempotency-Key', message: 'must not start with "platform."' },
          { path: 'type', message: 'letters, digits, dot, dash and underscore only' },
          { path: 'data', message: 'required' },
        ]),
      );
      expect(res.body.error.details).toHaveLength(4);
    });

    it('a single problem keeps a one-line message naming the field', async () => {
      const res = await tenant.call('POST', '/v1/endpoints', { body: { url, maxConcurrency: 1001 } });
      expect(res.body.error).toEqual({
        code: 'validation_failed',
        message: `maxConcurrency: ${res.body.error.details[0].message}`,
        details: [{ path: 'maxConcurrency', message: expect.stringMatching(/1000/) }],
      });
    });

    it("an endpoint's checks beyond its schema are reported together, under the URL's code", async () => {
      const before = await endpoints();
      const body = { url: 'https://user:pw@hooks.example.com/x', retryPolicy: { maxEventAgeSeconds: 315_000_000 } };
      const created = await tenant.call('POST', '/v1/endpoints', { body });
      expectError(created, 400, 'credentials_in_url');
      expect(created.body.error.details.map((d: { path: string }) => d.path)).toEqual(['retryPolicy.maxEventAgeSeconds', 'url']);
      expect(await endpoints()).toBe(before);

      const id = (await tenant.call('POST', '/v1/endpoints', { body: { url } })).body.id as string;
      const patched = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { ...body, signature: { scheme: 'ed25519' } } });
      expectError(patched, 400, 'credentials_in_url');
      expect(patched.body.error.details.map((d: { path: string }) => d.path)).toEqual(['retryPolicy.maxEventAgeSeconds', 'signature.scheme', 'url']);
      expect((await tenant.call('GET', `/v1/endpoints/${id}`)).body.url).toBe(url);
    });

    it('an endpoint URL refused by the address guard is reported with its path too', async () => {
      const res = await tenant.call('POST', '/v1/endpoints', { body: { url: 'ftp://files.example.com/x' } });
      expectError(res, 400, 'scheme_not_allowed');
      expect(res.body.error.details).toEqual([{ path: 'url', message: res.body.error.message }]);
    });
  });

  describe('a filter that would match everything, or nothing, is refused', () => {
    const empty = 'must not be empty; leave it out to filter nothing';
    const later = '2026-06-02T00:00:00Z';
    const earlier = '2026-06-01T00:00:00Z';
    it.each([
      ['/v1/events?type=&messageId=', [{ path: 'type', message: empty }, { path: 'messageId', message: empty }]],
      ['/v1/deliveries?endpointId=&eventId=&eventType=', [{ path: 'endpointId', message: empty }, { path: 'eventId', message: empty }, { path: 'eventType', message: empty }]],
      ['/v1/audit-log?action=&targetType=&targetId=', [{ path: 'action', message: empty }, { path: 'targetType', message: empty }, { path: 'targetId', message: empty }]],
      [`/v1/events?since=${later}&until=${earlier}`, [{ path: 'since', message: 'must not be after until' }]],
      [`/v1/deliveries?since=${later}&until=${earlier}`, [{ path: 'since', message: 'must not be after until' }]],
      [`/v1/audit-log?since=${later}&until=${earlier}&action=`, [{ path: 'action', message: empty }, { path: 'since', message: 'must not be after until' }]],
      [`/v1/deliveries?status=bogus&since=${later}&until=${earlier}`, [{ path: 'status', message: expect.stringContaining('Invalid option') }, { path: 'since', message: 'must not be after until' }]],
    ])('GET %s answers 400 listing each problem', async (path, details) => {
      const res = await tenant.call('GET', path);
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual(details);
    });

    it('a bad cursor is listed with the query\'s other problems, and alone keeps its own code', async () => {
      const both = await tenant.call('GET', '/v1/deliveries?cursor=bad&status=bogus');
      expectError(both, 400, 'invalid_cursor');
      expect(both.body.error.details.map((d: { path: string }) => d.path)).toEqual(['cursor', 'status']);
      const alone = await tenant.call('GET', '/v1/endpoints?cursor=bad');
      expectError(alone, 400, 'invalid_cursor');
      expect(alone.body.error.details).toEqual([{ path: 'cursor', message: 'cursor is not valid' }]);
    });

    it('an empty filter value or a reversed window in a bulk replay replays nothing', async () => {
      const replays = () => t.platform.db('replays').where({ tenant_id: uuidOf('tenant', tenant.id) }).count({ n: '*' }).then((r) => Number(r[0]!.n));
      const before = await replays();
      const res = await tenant.call('POST', '/v1/replays', { body: { filter: { endpointId: '', eventType: '', since: later, until: earlier }, reason: 'an unset variable' } });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual([
        { path: 'filter.endpointId', message: empty },
        { path: 'filter.eventType', message: empty },
        { path: 'filter.since', message: 'must not be after until' },
      ]);
      expect(await replays()).toBe(before);
    });
  });

  describe('the NUL character, which no text column can hold, is refused with its path', () => {
    const nul = 'must not contain the NUL character (U+0000), which no text column can hold';
    it.each([
      ['GET', '/v1/endpoints/%00', undefined, [{ path: 'id', message: nul }]],
      ['GET', '/v1/events?messageId=a%00', undefined, [{ path: 'messageId', message: nul }]],
      ['POST', '/v1/api-keys', { name: 'a\u0000' }, [{ path: 'name', message: nul }]],
      ['POST', '/v1/endpoints', { url, description: '\u0000', metadata: { k: 'v\u0000' } }, [{ path: 'metadata', message: 'unknown field' }, { path: 'description', message: nul }]],
      ['POST', '/v1/events', { type: 'order.created', messageId: '\u0000', data: { note: 'a\u0000b' } }, [{ path: 'messageId', message: nul }]],
    ])('%s %s answers 400 naming where', async (method, path, body, details) => {
      const before = await endpoints();
      const res = await tenant.call(method, path, body === undefined ? {} : { body });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual(details);
      expect(await endpoints()).toBe(before);
    });

    it("an event's data is its own: a NUL escape in it is taken, and kept as written", async () => {
      const res = await tenant.call('POST', '/v1/events', { rawBody: '{"type":"order.created","data":{"note":"a\\u0000b"}}', headers: { 'content-type': 'application/json' } });
      expect(res.status, res.text).toBe(202);
      const shown = await tenant.call('GET', `/v1/events/${res.body.id}`);
      expect(shown.text).toContain('"note":"a\\u0000b"');
    });
  });

  describe('unknown query parameters are refused like unknown body fields', () => {
    it.each([
      ['/v1/endpoints?limt=5', 'limt'],
      ['/v1/sources?limit=5&sort=asc', 'sort'],
      ['/v1/events?typ=order.created', 'typ'],
      ['/v1/deliveries?state=dead', 'state'],
      ['/v1/audit-log?who=me', 'who'],
      ['/v1/replays/rpl_x?verbose=1', 'verbose'],
      ['/healthz?probe=1', 'probe'],
    ])('GET %s answers 400 with a details entry for %s', async (path, param) => {
      const res = await tenant.call('GET', path);
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual([{ path: param, message: 'unknown query parameter' }]);
    });

    it('known parameters still work, and a POST refuses parameters it has none of', async () => {
      expect((await tenant.call('GET', '/v1/endpoints?limit=5')).status).toBe(200);
      const res = await tenant.call('POST', `/v1/endpoints?url=${encodeURIComponent(url)}`, { body: { url } });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual([{ path: 'url', message: 'unknown query parameter' }]);
    });

    it('a provider callback ignores a query string (providers and tenants append their own)', async () => {
      const source = await createSource(tenant, 'momo-communication');
      const body = communication.messageStatus('m-query', 'sent');
      const res = await postCallback(t, `${source.id}?token=abc`, sign.communication(source.secret, body));
      expect(res.status, res.text).toBe(200);
    });
  });
});
