import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../../tenancy';
import type { ProviderService } from '../providers/service';
import { cookieOf } from '../sign-in/oauth-http';
import { CONSOLE_COOKIE } from './routes';
import type { TeamService } from './service';

const header = (request: FastifyRequest, name: string) => {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
};

/**
 * Whose API call this is: a secret key in Authorization (as always), else the console session
 * of the cookie, which names the environment in `MCP-Meter-Environment` (sandbox by default),
 * proves a change with `X-CSRF-Token`, and is held to the member's role. With neither, the
 * key check answers its 401.
 */
export function consoleAuthenticator(providers: ProviderService, team: TeamService) {
  return (request: FastifyRequest): Promise<AuthContext> => {
    const token = request.headers.authorization === undefined ? cookieOf(request, CONSOLE_COOKIE) : undefined;
    if (token === undefined) return providers.authenticate(request.headers.authorization);
    return team.authenticate({
      token,
      csrfToken: header(request, 'x-csrf-token'),
      method: request.method,
      route: request.routeOptions.url ?? request.url,
      environment: header(request, 'mcp-meter-environment'),
    });
  };
}
