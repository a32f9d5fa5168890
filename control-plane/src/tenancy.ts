import type { Environment } from '@mcp-meter/contracts/usage-record';

/**
 * Whose request this is: the provider an API key (or a console session) belongs to, and the
 * environment it works in. Every service takes it and every repository query is scoped by it.
 */
export interface AuthContext {
  providerId: string;
  environment: Environment;
  /**
   * The environments the caller may read side by side (analytics by environment): a console
   * session every environment its provider has enabled; absent for an API key, which reads only
   * its own.
   */
  readable?: readonly Environment[];
}
