import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // The client package's sources, as tsconfig.json's "payorch-source" condition resolves them:
    // tests run the code as written, without building packages/client first.
    alias: [{ find: /^@payorch\/client$/, replacement: fileURLToPath(new URL('./packages/client/src/index.ts', import.meta.url)) }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: more workers than that only trade CPU between PGlite instances.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
