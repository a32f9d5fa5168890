export {
  type EntitlementSnapshot,
  entitlementKey,
  type McpServerSnapshot,
  mcpServerKey,
  parseMcpServerSnapshot,
} from './format';
export { MemorySnapshotStore, openSnapshotStore, RedisSnapshotStore, type SnapshotStore } from './store';
