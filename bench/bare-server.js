// The HTTP floor: Fastify, the same raw-body parser, and only the request signature check
// (dist/domain/signing.js, the code payorch runs). No database, no schema, no logging.
// node bench/bare-server.js <config.json>  → prints the address, serves until killed.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import { signatureMatches } from '../dist/domain/signing.js';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const secrets = new Map(Object.entries(config.secrets).map(([id, s]) => [id, Array.isArray(s) ? s : [s]]));
const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });
app.removeAllContentTypeParsers();
app.addContentTypeParser(['application/json'], { parseAs: 'buffer' }, (request, body, done) => {
  request.rawBodyBytes = body;
  done(null, JSON.parse(body.toString('utf8')));
});
app.addHook('preValidation', async (request, reply) => {
  const serviceId = request.headers['x-service-id'];
  const ok =
    typeof serviceId === 'string' &&
    signatureMatches(secrets.get(serviceId) ?? [], String(request.headers['x-signature']), String(request.headers['x-timestamp']), request.method, request.url, request.rawBodyBytes ?? Buffer.alloc(0));
  if (!ok) return reply.code(401).send({ error: 'UNAUTHORIZED' });
});
app.post('/bare', async () => ({ ok: true }));
const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${address}\n`);
