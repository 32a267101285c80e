import type { FastifyInstance } from 'fastify';

/**
 * Holds the OpenAPI document to what the service actually answers: every error a test app
 * answers on a documented route is recorded, and `undocumented()` names each (route, status, code)
 * whose response in the document does not list that code. startTestApp checks it when the app
 * closes, so every test file that uses it also tests the document's error lists.
 */

interface OpenApiOperation {
  responses?: Record<string, { content?: Record<string, { schema?: ErrorSchema }> }>;
}

interface ErrorSchema {
  $ref?: string;
  allOf?: Array<{ $ref?: string; properties?: { error?: { enum?: string[] } } }>;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, OpenApiOperation>>;
}

/** `/intents/:id` as the document writes it: `/intents/{id}`. */
export const documentedPath = (fastifyUrl: string) => fastifyUrl.replace(/:(\w+)/g, '{$1}');

/** The codes the document lists for one response, or null when it does not ref Error at all. */
export function listedErrorCodes(operation: OpenApiOperation | undefined, status: number): string[] | null {
  const schema = operation?.responses?.[String(status)]?.content?.['application/json']?.schema;
  const [error, narrowed] = schema?.allOf ?? [];
  if (error?.$ref !== '#/components/schemas/Error') return null;
  return narrowed?.properties?.error?.enum ?? [];
}

export function recordErrorAnswers(app: FastifyInstance): { undocumented(): string[] } {
  const answered = new Map<string, { method: string; url: string; status: number; code: string }>();
  app.addHook('onSend', async (request, reply, payload) => {
    const url = request.routeOptions.url;
    if (reply.statusCode < 400 || url === undefined || typeof payload !== 'string') return payload;
    let code: unknown;
    try {
      code = (JSON.parse(payload) as { error?: unknown }).error;
    } catch {
      return payload;
    }
    if (typeof code === 'string') {
      const answer = { method: request.method.toLowerCase(), url, status: reply.statusCode, code };
      answered.set(`${answer.method} ${url} ${answer.status} ${code}`, answer);
    }
    return payload;
  });
  return {
    undocumented() {
      // A workers-role app serves only the probes and /metrics, and no API document to hold them to.
      if (!app.hasDecorator('swagger')) return [];
      const document = app.swagger() as unknown as OpenApiDocument;
      return [...answered.entries()]
        .filter(([, { method, url }]) => document.paths[documentedPath(url)]?.[method] !== undefined)
        .filter(([, { method, url, status, code }]) => {
          const listed = listedErrorCodes(document.paths[documentedPath(url)]?.[method], status);
          return listed === null || !listed.includes(code);
        })
        .map(([key]) => key);
    },
  };
}
