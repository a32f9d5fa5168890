export { ConfigError, type EnvReader, readEnv } from './env';
export { ID, type IdPrefix, newId, ulid } from './ids';
export {
  compileKeyRules,
  foldKey,
  inspectJson,
  type JsonShapeProblem,
  type KeyRules,
  type KeyRulesSpec,
} from './json-shape';
export { createLogger, LOG_LEVELS, type Logger, type LogLevel } from './logger';
export { connectedWithin, freePort, processAlive } from './net';
export {
  isAllowedPort,
  isInternalAddress,
  OutboundGuard,
  readOutboundAllowedHosts,
  UnsafeUrlError,
} from './outbound';
export { sameSecret } from './secrets';
export { readServiceUrls, type ServiceUrls, writeServiceUrls } from './service-urls';
