import { defineConfig } from 'vitest/config';

/**
 * Two projects: `unit` (pure logic, no services, seconds: `npm run test:unit`) and
 * `integration` (real PostgreSQL, Redis, Kafka and ClickHouse started by the global setup).
 * `npm test` runs both. A unit test's file ends in `.unit.test.ts`.
 */
export default defineConfig({
  test: {
    exclude: ['**/node_modules/**', 'data/**'],
    // chdb binds one data directory per process and must not be shared between test files.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    testTimeout: 120_000,
    hookTimeout: 240_000,
    reporters: ['default'],
    // Test origins and webhook receivers listen on loopback, which the SSRF guard refuses unless
    // allowed; services the tests spawn inherit it. Tests of the guard itself set their own list.
    // MCPMETER_STRICT_POOL: a transaction that asks the pool for a second connection fails at
    // once (control-plane/src/db/pool.ts) instead of starving the pool under load.
    env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', MCPMETER_STRICT_POOL: '1' },
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['**/test/**/*.unit.test.ts'] },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['**/test/**/*.test.ts'],
          exclude: ['**/node_modules/**', 'data/**', '**/*.unit.test.ts'],
          globalSetup: ['./test/global-setup.ts'],
        },
      },
    ],
  },
});
