import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Problem } from '../../http/schemas';
import type { AuthorizationParams } from './authorization';
import { isMetadataDocumentUrl } from './client-metadata';
import { OAuthError } from './errors';
import { OAuthErrorBody } from './schemas';

/** What the OAuth endpoints read from a request and how they answer an OAuth error. */

/** The request parameters an authorization request carries through the hosted page. */
const PARAM_NAMES = [
  'response_type',
  'client_id',
  'redirect_uri',
  'state',
  'scope',
  'code_challenge',
  'code_challenge_method',
  'resource',
  'mcp_subdomain',
] as const;

export const CSRF_COOKIE = 'mcpm_signin';

/** OAuth endpoints answer RFC 6749 errors; input refused before them (a NUL, a bad body) is problem+json. */
export const OAuthOrProblem = Type.Union([OAuthErrorBody, Problem]);
/** Marks a form that named a parameter twice (the name given as its value). */
export const DUPLICATE = 'duplicate parameter';

/** Only string parameters, each once (RFC 6749 §3.1); anything else is a malformed request. */
export function oauthForm(body: unknown): Record<string, string> {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new OAuthError('invalid_request', 'Send the parameters as a form or a JSON object');
  const form: Record<string, string> = {};
  for (const [name, value] of Object.entries(body)) {
    if (name === DUPLICATE)
      throw new OAuthError('invalid_request', `${String(value)} is given more than once`);
    if (typeof value !== 'string') throw new OAuthError('invalid_request', `${name} must be a string`);
    if (value.length > 4096) throw new OAuthError('invalid_request', `${name} is too long`);
    form[name] = value;
  }
  return form;
}

export const paramsOf = (source: Record<string, unknown>): AuthorizationParams => {
  const params: Record<string, string> = {};
  for (const name of PARAM_NAMES) {
    const value = source[name];
    if (typeof value === 'string') params[name] = value;
  }
  return params;
};

export const cookieOf = (request: FastifyRequest, name: string): string | undefined => {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return rest.join('=');
  }
  return undefined;
};

/** RFC 6749 §5.2: a client that tried Basic authentication is challenged with Basic. */
export const sendOAuthError = (reply: FastifyReply, error: OAuthError, triedBasic = false) => {
  if (error.status === 401 && triedBasic) reply.header('www-authenticate', 'Basic realm="oauth"');
  return reply
    .status(error.status)
    .header('cache-control', 'no-store')
    .send({ error: error.error, error_description: error.description });
};

/**
 * How the page names the application: its own name, and for a metadata-document client the host
 * that published it too, the one part of it nobody can claim falsely.
 */
export const displayName = (client: { id: string; client_name: string | null }): string | null => {
  if (!isMetadataDocumentUrl(client.id)) return client.client_name;
  const host = new URL(client.id).host;
  return client.client_name === null ? host : `${client.client_name} (${host})`;
};

/** Browser-based MCP clients read discovery and call these endpoints from other origins. */
export const allowAnyOrigin = (reply: FastifyReply) => reply.header('access-control-allow-origin', '*');

/**
 * Customer sign-in (spec 4.2, 4.3; MCP authorization): authorization server metadata, client
 * registration, the hosted sign-in page and its JSON twins, the token endpoint and revocation.
 */
