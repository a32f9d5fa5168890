import * as oauth from 'oauth4webapi';
import { injectClient, type TestControlPlane } from './control-plane';
import { sell } from './seller';

/** oauth4webapi against loopback http. */
export const insecure = { [oauth.allowInsecureRequests]: true } as const;
export const REDIRECT = 'http://127.0.0.1:7777/callback';

/** A product, a free plan and an MCP server on `plane`; answers what a sign-in request names. */
export async function signInTarget(plane: TestControlPlane, url: string) {
  const created = await plane.controlPlane.providers.create({ displayName: 'Gate Co' });
  const client = injectClient(plane.controlPlane, created.sandboxKey);
  const { register } = await sell(client, { product: 'Gate', plans: [{ name: 'Free', price: 0, limit: 5 }] });
  const server = await register('http://127.0.0.1:1/mcp', { defaultPlan: 'Free', name: 'gate' });
  const issuer = new URL(url);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
  const registered = await oauth.processDynamicClientRegistrationResponse(
    await oauth.dynamicClientRegistrationRequest(
      as,
      { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', client_name: 'Gate client' },
      insecure,
    ),
  );
  return {
    client: registered,
    resource: server.mcpProxyUrl,
    api: client,
    key: created.sandboxKey,
    providerId: created.provider.id,
  };
}

export const post = (url: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

export const credentials = async (
  url: string,
  intent: 'signups' | 'logins',
  of: SignInTarget,
  email: string,
  password: string,
) =>
  post(url, `/v1/customer/auth/${intent}`, {
    client_id: of.client.client_id,
    redirect_uri: REDIRECT,
    code_challenge_method: 'S256',
    code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()),
    resource: of.resource,
    email,
    password,
  });

export type SignInTarget = Awaited<ReturnType<typeof signInTarget>>;
