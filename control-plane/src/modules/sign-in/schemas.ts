import { Type } from '@sinclair/typebox';

const text = (max: number, description?: string) =>
  Type.Optional(Type.String({ maxLength: max, ...(description === undefined ? {} : { description }) }));

/** The parameters of an authorization request (RFC 6749 §4.1.1 with PKCE and RFC 8707's resource). */
export const AuthorizationRequestFields = Type.Object(
  {
    response_type: text(20),
    client_id: text(200),
    redirect_uri: text(2000),
    state: text(1000),
    scope: text(200),
    code_challenge: text(200),
    code_challenge_method: text(20),
    resource: text(2000, 'The MCP server URL the token is for (RFC 8707)'),
    mcp_subdomain: text(100, 'The MCP server, when no resource is given'),
  },
  { additionalProperties: true },
);

/** Spec 4.3's login fields: client_id, redirect_uri and password at least one character, email an email. */
const credentials = {
  client_id: Type.String({ minLength: 1, maxLength: 200 }),
  redirect_uri: Type.String({ minLength: 1, maxLength: 2000 }),
  email: Type.String({ format: 'email', maxLength: 320 }),
  password: Type.String({ minLength: 1, maxLength: 1024 }),
  scope: text(200),
  state: text(1000),
  code_challenge: text(200),
  code_challenge_method: text(20),
  mcp_subdomain: text(100),
  resource: text(2000),
};

export const LoginBody = Type.Object(credentials, { additionalProperties: false });
export const SignupBody = Type.Object({ ...credentials, name: text(200) }, { additionalProperties: false });

/** A sign-up waiting for the code mailed to its email. */
export const SignupStarted = Type.Object({
  verificationId: Type.String(),
  email: Type.String(),
  expiresAt: Type.String({ format: 'date-time' }),
});

export const VerifyBody = Type.Object(
  { code: Type.String({ minLength: 1, maxLength: 20, description: 'The six digits mailed to the email' }) },
  { additionalProperties: false },
);

/** RFC 7591 client metadata; checked by the service so errors carry RFC 7591's codes. */
export const ClientRegistration = Type.Object(
  {
    redirect_uris: Type.Optional(
      Type.Array(Type.String(), { description: 'https, loopback http, or a private-use scheme' }),
    ),
    token_endpoint_auth_method: Type.Optional(Type.String()),
    grant_types: Type.Optional(Type.Array(Type.String())),
    response_types: Type.Optional(Type.Array(Type.String())),
    application_type: Type.Optional(Type.String()),
    client_name: Type.Optional(Type.String()),
    client_uri: Type.Optional(Type.String()),
    logo_uri: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

export const TokenResponse = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
  refresh_token: Type.String(),
  scope: Type.String(),
});

export const OAuthErrorBody = Type.Object({
  error: Type.String(),
  error_description: Type.String(),
});
