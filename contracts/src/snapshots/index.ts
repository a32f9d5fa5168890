export {
  ACCESS_TOKEN_AUDIENCE,
  type AccessTokenClaims,
  type EntitlementSnapshot,
  entitlementKey,
  JWKS_KEY,
  MCP_SCOPE,
  type McpServerSnapshot,
  mcpServerKey,
  parseMcpServerSnapshot,
  parseRevocation,
  type RevocationSnapshot,
  revocationKey,
  revokedGrantKey,
  subdomainOfHost,
  subdomainOfResource,
} from './format';
export { type VerifyResult, verifyAccessToken } from './jwt';
export { internalToken, loadSecretKey, readSecretKey, seal, unseal } from './secrets';
export { MemorySnapshotStore, openSnapshotStore, RedisSnapshotStore, type SnapshotStore } from './store';
