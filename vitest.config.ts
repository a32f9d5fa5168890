import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/test/**/*.test.ts'],
    exclude: ['**/node_modules/**', 'data/**'],
    globalSetup: ['./test/global-setup.ts'],
    // chdb binds one data directory per process and must not be shared between test files.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    testTimeout: 120_000,
    hookTimeout: 240_000,
    reporters: ['default'],
    // Test origins and webhook receivers listen on loopback, which the SSRF guard refuses unless
    // allowed; services the tests spawn inherit it. Tests of the guard itself set their own list.
    env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' },
  },
});
