import type { Duplex, Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { Middleware } from './route.js';

/** Shaped like the body parser's errors, so errors.ts maps them to the same answers. */
class BodyError extends Error {
  constructor(
    readonly status: number,
    readonly type: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

function decoder(encoding: string): Duplex | undefined {
  switch (encoding) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    default:
      return undefined;
  }
}

/**
 * Reads the request body as raw bytes, at most `limitBytes` of them after decoding.
 *
 * body-parser reads off the whole request before it reports a body over its limit, so a client
 * that announces 50 GB, or streams a chunked body that never ends, is read (and held) until the
 * request timeout, and learns nothing but a 408. Here the 413 goes out the moment the limit is
 * known to be crossed: from Content-Length before a single body byte is read, otherwise at the
 * byte that crosses it (counted after decompression, so a gzip bomb is cut too). The answer
 * closes the connection: the client has said it will send more than we accept.
 */
export function rawBody(limitBytes: number): Middleware {
  return (req, res, next) => {
    const tooLarge = () => {
      res.setHeader('connection', 'close');
      return new BodyError(413, 'entity.too.large', 'request entity too large');
    };
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > limitBytes) return next(tooLarge());

    const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
    let stream: Readable = req;
    let decoded: Duplex | undefined;
    if (encoding !== 'identity') {
      decoded = decoder(encoding);
      if (!decoded) return next(new BodyError(415, 'encoding.unsupported', 'content encoding unsupported'));
      stream = decoded;
      req.pipe(decoded);
    }

    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      stream.off('data', onData);
      if (decoded) {
        req.unpipe(decoded);
        decoded.on('error', () => undefined);
        decoded.destroy();
      }
      if (err !== undefined) {
        // Whatever the client still sends is discarded until the connection closes.
        req.resume();
        return next(err);
      }
      req.body = Buffer.concat(chunks, received);
      next();
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) return settle(tooLarge());
      chunks.push(chunk);
    };
    stream.on('data', onData);
    stream.once('end', () => settle());
    // A corrupt gzip/deflate/br body: the client's fault (400), never an outage.
    decoded?.on('error', () => settle(new BodyError(400, undefined, 'request body could not be decoded')));
    // A client that goes away mid-body: nobody is left to answer, but the read must end here.
    const aborted = () => settle(new BodyError(400, 'request.aborted', 'request aborted'));
    req.on('error', aborted);
    req.once('close', () => {
      if (!req.complete) aborted();
    });
  };
}
