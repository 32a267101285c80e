/**
 * `import { createPayorchClient } from 'payorch'`: the client lives in its own package,
 * @payorch/client (packages/client), which installs without the server's dependencies.
 */
export * from '@payorch/client';
