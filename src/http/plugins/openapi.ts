import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/** The OpenAPI 3.1 document is generated from the same TypeBox schemas that validate requests. */
export async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'payorch',
        version,
        description:
          'Payment orchestration: signed payment intents, a double-entry ledger, merchant invoices and PSPX payouts. ' +
          'Every endpoint except /health, /openapi.json and /docs needs a signature: an HTTP Message Signature ' +
          '(RFC 9421, HMAC-SHA256: Signature-Input, Signature, Content-Digest; it covers X-User-Id), or the HMAC ' +
          'signature headers (X-Service-Id, X-Timestamp, X-Signature over `timestamp\\nMETHOD\\npath?query\\nsha256(body)`). ' +
          'docs/SECURITY.md section 2 has both.',
      },
      components: {
        securitySchemes: {
          signature: { type: 'apiKey', in: 'header', name: 'X-Signature' },
          messageSignature: { type: 'apiKey', in: 'header', name: 'Signature' },
          adminToken: { type: 'http', scheme: 'bearer' },
        },
      },
      security: [{ messageSignature: [] }, { signature: [] }],
    },
  });
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) route.config = { ...route.config, auth: 'none' };
  });
  await app.register(swaggerUi, { routePrefix: '/docs', logLevel: 'warn' });
  app.get(
    '/openapi.json',
    { config: { auth: 'none' }, schema: { tags: ['health'], summary: 'This OpenAPI 3.1 document (no signature)', security: [] } },
    async () => app.swagger(),
  );
}
