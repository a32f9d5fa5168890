import type { OutboundGuard } from '@mcp-meter/contracts/kit';
import { Agent, request } from 'undici';
import { redirectUriProblem } from './redirect-uris';

/**
 * OAuth Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, the MCP
 * 2025-11-25 way for a client with no prior relationship to register): the `client_id` is an
 * https URL and the JSON document there describes the client. Fetched through the SSRF guard,
 * without redirects, bounded in time and size, and cached by the caller for the time the answer's
 * Cache-Control allows (within bounds).
 */

/** What the service keeps of a document: the fields a registered client has. */
export interface ClientMetadata {
  redirect_uris: string[];
  client_name: string | null;
  client_uri: string | null;
  logo_uri: string | null;
  application_type: 'web' | 'native';
}

/** A document that cannot be used, in words for the error page. */
export class ClientMetadataError extends Error {}

/** Documents are small; a larger answer is not a client description (draft §4: a 5 KB guide). */
const MAX_BYTES = 16 * 1024;
const TIMEOUT_MS = 5_000;
/** Cache bounds: never refetched more often than every 5 minutes, never kept beyond a day. */
export const MIN_CACHE_MS = 5 * 60_000;
export const MAX_CACHE_MS = 24 * 3600_000;
const DEFAULT_CACHE_MS = 3600_000;

/** Whether a client_id names a metadata document (an https URL) rather than a registered client. */
export const isMetadataDocumentUrl = (clientId: string): boolean => clientId.startsWith('https://');

/**
 * Why a URL cannot be a client_id (draft §3): https, a path, no fragment, no credentials, no dot
 * segments; undefined when it can.
 */
export function clientIdUrlProblem(clientId: string): string | undefined {
  if (clientId.length > 2000) return 'is longer than 2000 characters';
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:') return 'must be an https URL';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.hash !== '' || clientId.includes('#')) return 'must not have a fragment';
  if (url.pathname === '/' || url.pathname === '') return 'must have a path';
  if (/\/\.\.?(\/|$)/.test(clientId.slice(url.origin.length))) return 'must not have . or .. segments';
  if (url.href !== clientId) return 'must be in its normal form';
  return undefined;
}

/** max-age of a Cache-Control header, bounded; no-store and no-cache count as the minimum. */
export function cacheMsOf(cacheControl: string | undefined): number {
  if (cacheControl === undefined) return DEFAULT_CACHE_MS;
  if (/(^|,)\s*(no-store|no-cache)\s*(,|$)/i.test(cacheControl)) return MIN_CACHE_MS;
  const maxAge = /(^|,)\s*max-age\s*=\s*"?(\d+)"?/i.exec(cacheControl)?.[2];
  if (maxAge === undefined) return DEFAULT_CACHE_MS;
  return Math.min(MAX_CACHE_MS, Math.max(MIN_CACHE_MS, Number(maxAge) * 1000));
}

/** Checks a fetched document against the URL it came from (draft §4.1); answers what is kept. */
export function readClientMetadata(clientId: string, document: unknown): ClientMetadata {
  if (document === null || typeof document !== 'object' || Array.isArray(document))
    throw new ClientMetadataError('The application’s metadata is not a JSON object');
  const doc = document as Record<string, unknown>;
  if (doc.client_id !== clientId)
    throw new ClientMetadataError('The application’s metadata names another client_id');
  if ('client_secret' in doc || 'client_secret_expires_at' in doc)
    throw new ClientMetadataError('The application’s metadata must not carry a client secret');
  const method = doc.token_endpoint_auth_method ?? 'none';
  if (method !== 'none')
    throw new ClientMetadataError(
      'The application’s metadata must use token_endpoint_auth_method none (shared secrets cannot be published)',
    );
  const uris = doc.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > 20)
    throw new ClientMetadataError('The application’s metadata must list 1 to 20 redirect_uris');
  for (const uri of uris)
    if (typeof uri !== 'string' || uri.length > 2000 || redirectUriProblem(uri) !== undefined)
      throw new ClientMetadataError('The application’s metadata lists a redirect URI that is not allowed');
  const grantTypes = doc.grant_types ?? ['authorization_code'];
  if (!Array.isArray(grantTypes) || !grantTypes.includes('authorization_code'))
    throw new ClientMetadataError('The application’s metadata must allow the authorization_code grant');
  const text = (name: string, max: number): string | null => {
    const value = doc[name];
    return typeof value === 'string' && value.length <= max ? value : null;
  };
  const httpsUrl = (name: string): string | null => {
    const value = text(name, 2000);
    return value !== null && /^https:\/\/\S+$/.test(value) ? value : null;
  };
  return {
    redirect_uris: uris as string[],
    client_name: text('client_name', 200),
    client_uri: httpsUrl('client_uri'),
    logo_uri: httpsUrl('logo_uri'),
    application_type: doc.application_type === 'native' ? 'native' : 'web',
  };
}

export class ClientMetadataFetcher {
  private readonly agent: Agent;

  /** `ca`: extra trusted certificates (tests; a private deployment sets NODE_EXTRA_CA_CERTS instead). */
  constructor(
    private readonly guard: OutboundGuard,
    ca?: string,
  ) {
    this.agent = new Agent({
      connect: {
        timeout: TIMEOUT_MS,
        lookup: guard.lookup,
        ...(ca === undefined ? {} : { ca }),
      } as never,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      connections: 4,
    });
  }

  /** Fetches and checks the document at `clientId`; answers it and how long it may be cached. */
  async fetch(clientId: string): Promise<{ metadata: ClientMetadata; cacheMs: number }> {
    const problem = clientIdUrlProblem(clientId);
    if (problem !== undefined) throw new ClientMetadataError(`The client_id URL ${problem}`);
    const url = new URL(clientId);
    const refused = this.guard.literalProblem(url) ?? (await this.guard.problem(url));
    if (refused !== undefined)
      throw new ClientMetadataError(`The application’s metadata cannot be fetched: the URL ${refused}`);
    let body = '';
    let cacheControl: string | undefined;
    try {
      const response = await request(url, {
        method: 'GET',
        headers: { accept: 'application/json', 'user-agent': 'mcp-meter-sign-in/0.1' },
        dispatcher: this.agent,
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      if (response.statusCode !== 200) {
        await response.body.dump();
        throw new ClientMetadataError(
          `The application’s metadata could not be fetched (HTTP ${response.statusCode})`,
        );
      }
      const header = response.headers['cache-control'];
      cacheControl = Array.isArray(header) ? header.join(',') : header;
      let size = 0;
      const chunks: Buffer[] = [];
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_BYTES) {
          response.body.destroy();
          throw new ClientMetadataError('The application’s metadata is larger than 16 KiB');
        }
        chunks.push(chunk);
      }
      body = Buffer.concat(chunks).toString('utf8');
    } catch (error) {
      if (error instanceof ClientMetadataError) throw error;
      throw new ClientMetadataError('The application’s metadata could not be fetched');
    }
    let document: unknown;
    try {
      document = JSON.parse(body);
    } catch {
      throw new ClientMetadataError('The application’s metadata is not JSON');
    }
    return { metadata: readClientMetadata(clientId, document), cacheMs: cacheMsOf(cacheControl) };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
