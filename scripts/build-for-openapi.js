// The OpenAPI document is written from the built schemas, and the client's types are generated
// from that document; so a new schema that a client type already names cannot type-check until
// the document knows it. This build therefore emits even when the types do not check yet, says
// so, and leaves the verdict to `npm run typecheck`, which runs after the document is written.
import { spawnSync } from 'node:child_process';

/** The tsc projects, client first: the service's build reads the client's. */
const projects = ['packages/client/tsconfig.json', 'tsconfig.build.json'];
for (const project of projects) {
  const run = spawnSync('npx', ['tsc', '-p', project], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (run.status !== 0)
    console.warn(
      `openapi: tsc -p ${project} reported type errors; the document is written from what it emitted (npm run typecheck judges after)`,
    );
}
