import { STATUS_CODES } from 'node:http';
import { parseArgs } from 'node:util';
import { type HttpMethod, PayorchError } from '@payorch/client';
import { apiContext, COMMON_OPTIONS, parseCommandLine, reportFailure } from './api-context.js';
import { type CliIo, EXIT, type ExitCode, UsageError } from './cli-io.js';

const METHODS: readonly HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

function printAnswer(io: CliIo, json: boolean, status: number, body: unknown): void {
  if (!json) io.out(`${`${status} ${STATUS_CODES[status] ?? ''}`.trimEnd()}\n`);
  io.out(typeof body === 'string' ? `${body}\n` : `${JSON.stringify(body, null, 2)}\n`);
}

/**
 * call METHOD PATH [BODY]: any signed request, the answer printed as is. BODY is sent byte for byte.
 * Never retried: the request may be anything, and a debugging tool shows the first answer.
 */
export async function callCommand(args: string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommandLine(() => parseArgs({ args, allowPositionals: true, options: COMMON_OPTIONS }));
  const [rawMethod, path, body, ...rest] = positionals;
  const method = METHODS.find((value) => value === rawMethod?.toUpperCase());
  if (method === undefined || path === undefined || rest.length > 0) {
    throw new UsageError('usage: payorch call METHOD PATH [BODY] --service ID [--user N] [--url URL]');
  }
  if (!path.startsWith('/')) throw new UsageError('PATH must start with /');
  const context = apiContext(values, io);
  try {
    const answer = await context.client.request({
      method,
      path,
      retry: false,
      ...(body === undefined || body === '' ? {} : { rawBody: body }),
      ...(context.userId === undefined ? {} : { userId: context.userId }),
    });
    printAnswer(io, context.out.json, answer.status, answer.body);
    return EXIT.OK;
  } catch (error) {
    if (!(error instanceof PayorchError)) return reportFailure(context, error);
    printAnswer(io, context.out.json, error.status, error.body);
    return error.status >= 500 ? EXIT.SERVER : EXIT.REFUSED;
  }
}
