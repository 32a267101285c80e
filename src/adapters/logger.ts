/** The part of a structured logger the domain uses (pino, as Fastify's, fits it). */
export interface Logger {
  info(bindings: object, message?: string): void;
  warn(bindings: object, message?: string): void;
  error(bindings: object, message?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}
