// The HTTP floor: Fastify, the same raw-body parser, and only the request signature check
// (dist/domain/signing.js, the code payorch runs). No database, no schema, no logging.
// node bench/bare-server.js <config.json>  → prints the address, serves until killed.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import { signatureMatches } from '../dist/domain/auth/signing.js';

const [configFile] = process.argv.slice(2);
if (configFile === undefined) throw new Error('usage: node bench/bare-server.js <config.json>');
/** @type {{ secrets: Record<string, string | string[]> }} */
const config = JSON.parse(readFileSync(configFile, 'utf8'));
const secrets = new Map(Object.entries(config.secrets).map(([id, s]) => [id, Array.isArray(s) ? s : [s]]));
const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });
app.removeAllContentTypeParsers();
/** @type {WeakMap<object, Buffer>} Each request's body as it came, for the signature check after parsing. */
const rawBodies = new WeakMap();
app.addContentTypeParser(['application/json'], { parseAs: 'buffer' }, (request, /** @type {Buffer} */ body, done) => {
  rawBodies.set(request, body);
  done(null, JSON.parse(body.toString('utf8')));
});
app.addHook('preValidation', async (request, reply) => {
  const serviceId = request.headers['x-service-id'];
  const ok =
    typeof serviceId === 'string' &&
    signatureMatches(
      secrets.get(serviceId) ?? [],
      String(request.headers['x-signature']),
      String(request.headers['x-timestamp']),
      request.method,
      request.url,
      rawBodies.get(request) ?? Buffer.alloc(0),
    );
  if (!ok) return reply.code(401).send({ error: 'UNAUTHORIZED' });
});
app.post('/bare', async () => ({ ok: true }));
const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${address}\n`);
