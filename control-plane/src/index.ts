export { type Clock, systemClock } from './clock';
export {
  type ControlPlaneConfig,
  readControlPlaneConfig,
  readSecretKey,
} from './config';
export { type Database, openDatabase } from './db/open';
export { buildControlPlane, type ControlPlane, type ControlPlaneDeps, startControlPlane } from './service';
