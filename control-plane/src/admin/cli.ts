/**
 * Operator CLI: `npm run admin -- <command>`. Prints one JSON object per command on stdout.
 * Works against DATABASE_URL, or the all-in-one data directory (DATA_DIR, default ./data),
 * whether `npm start` is running on it or not.
 */
import { parseArgs } from 'node:util';
import { ConfigError, createLogger, readEnv, readServiceUrls } from '@mcp-meter/contracts/kit';
import { MemorySnapshotStore } from '@mcp-meter/contracts/snapshots';
import { readDataDir } from '@mcp-meter/contracts/usage';
import { ENVIRONMENTS, type Environment } from '@mcp-meter/contracts/usage-record';
import { systemClock } from '../clock';
import { readSecretKey } from '../config';
import { openDatabase } from '../db/open';
import { ProcessorService } from '../modules/processors/service';
import { ProviderService } from '../modules/providers/service';
import { ROLES, type Role } from '../modules/team/repository';
import { TeamService } from '../modules/team/service';
import { TokenService } from '../modules/tokens/service';

const USAGE = `usage: npm run admin -- <command>
  provider create --name "<display name>" [--legal-name "<legal name>"] [--sandbox-only]
  provider list
  provider enable-live --id <prv_…>
  provider disable-live --id <prv_…>
    key rotate --provider <prv_…> --environment sandbox|live
  token create --key <secret key> --customer <customerRef> [--product <productRef>] [--expires-in <seconds>]
  reconcile --provider <prv_…> --from <ISO time> --to <ISO time>
    (the provider's live ledger against its Stripe balance transactions; differences reported, not fixed)
  member add --provider <prv_…> --email <email> --role owner|admin|developer|viewer
    (a console member; a new account's password is printed once: change it after signing in)
  db migrate
    (applies the PostgreSQL migrations not yet applied, as a control plane does when it starts)`;

class UsageError extends Error {}

/** What `--help` answers: the usage, printed as text rather than a JSON object. */
const HELP = Symbol('help');

function required(value: string | undefined, flag: string): string {
  if (value === undefined || value.trim() === '') throw new UsageError(`missing --${flag}`);
  return value;
}

async function run(argv: string[]): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      'legal-name': { type: 'string' },
      'sandbox-only': { type: 'boolean', default: false },
      id: { type: 'string' },
      provider: { type: 'string' },
      environment: { type: 'string' },
      key: { type: 'string' },
      customer: { type: 'string' },
      product: { type: 'string' },
      'expires-in': { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      email: { type: 'string' },
      role: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const command = positionals.join(' ');
  if (values.help || command === 'help' || command === '') return HELP;
  const known = [
    'provider create',
    'provider list',
    'provider enable-live',
    'provider disable-live',
    'key rotate',
    'token create',
    'reconcile',
    'db migrate',
    'member add',
  ];
  if (!known.includes(command)) throw new UsageError(`unknown command "${command}"`);

  const env = readEnv(process.env);
  const dataDir = readDataDir(env);
  const config = env.done({
    dataDir,
    // Signing keys are sealed with it: the same key as the control plane's.
    secretKey: readSecretKey(env, dataDir),
    databaseUrl: env.url('DATABASE_URL', ['postgres', 'postgresql']),
    // The issuer of the tokens it mints: PUBLIC_URL, else the port given, else what the service
    // running on this data directory recorded, else the default port.
    publicUrl: (
      env.url('PUBLIC_URL', ['http', 'https']) ??
      (process.env.PORT === undefined ? readServiceUrls(dataDir)?.publicUrl : undefined) ??
      `http://127.0.0.1:${env.int('PORT', 8080, { min: 0, max: 65535 })}`
    ).replace(/\/$/, ''),
    stripeApiUrl: (env.url('STRIPE_API_URL', ['http', 'https']) ?? 'https://api.stripe.com').replace(
      /\/$/,
      '',
    ),
  });
  const logger = createLogger({ level: 'warn', name: 'admin' });
  const database = await openDatabase({ ...config, logger });
  try {
    const providers = new ProviderService(database.pool, systemClock);
    switch (command) {
      case 'member add': {
        const role = required(values.role, 'role');
        if (!(ROLES as readonly string[]).includes(role))
          throw new UsageError(`--role must be one of ${ROLES.join(', ')}`);
        const providerId = required(values.provider, 'provider');
        await providers.get(providerId);
        const added = await new TeamService(database.pool, systemClock).addMember({
          providerId,
          email: required(values.email, 'email'),
          role: role as Role,
        });
        return {
          ...added,
          providerId,
          note:
            added.password === undefined
              ? 'An existing account: it signs in with its own password.'
              : 'The password is shown only now: sign in to the console and change it.',
        };
      }
      // Opening the database applied them; what it applied is the answer.
      case 'db migrate':
        return { applied: database.applied };
      case 'provider create': {
        const created = await providers.create({
          displayName: required(values.name, 'name'),
          legalName: values['legal-name'],
          liveEnabled: !values['sandbox-only'],
        });
        return {
          id: created.provider.id,
          displayName: created.provider.displayName,
          legalName: created.provider.legalName,
          liveEnabled: created.provider.liveEnabled,
          sandboxKey: created.sandboxKey,
          liveKey: created.liveKey,
          note: 'Keys are shown only now and stored hashed; keep them safe.',
        };
      }
      case 'provider list':
        return {
          data: (await providers.list()).map((p) => ({
            id: p.id,
            displayName: p.displayName,
            legalName: p.legalName,
            liveEnabled: p.liveEnabled,
            createdAt: p.createdAt.toISOString(),
          })),
        };
      case 'provider enable-live':
      case 'provider disable-live': {
        const id = required(values.id, 'id');
        const enabled = command === 'provider enable-live';
        await providers.setLiveEnabled(id, enabled);
        return { id, liveEnabled: enabled };
      }
      case 'token create': {
        // The key decides provider and environment, exactly as on the API.
        const auth = await providers.authenticate(`Bearer ${required(values.key, 'key')}`);
        const expires = values['expires-in'] === undefined ? undefined : Number(values['expires-in']);
        if (expires !== undefined && (!Number.isInteger(expires) || expires < 60 || expires > 30 * 86400)) {
          throw new UsageError('--expires-in must be whole seconds between 60 and 2592000');
        }
        const tokens = new TokenService(
          database.pool,
          systemClock,
          new MemorySnapshotStore(),
          config.publicUrl,
          config.secretKey,
          'refuse',
        );
        // Awaited here: returning the promise would let `finally` close the pool under it.
        return await tokens.issue(auth, {
          customerRef: required(values.customer, 'customer'),
          productRef: values.product,
          expiresInSeconds: expires,
        });
      }
      case 'reconcile': {
        const from = new Date(required(values.from, 'from'));
        const to = new Date(required(values.to, 'to'));
        if (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime()) || to <= from)
          throw new UsageError('--from and --to must be ISO times, --to after --from');
        const processors = new ProcessorService(database.pool, systemClock, config.secretKey, {
          url: config.stripeApiUrl,
        });
        return await processors.reconcile(required(values.provider, 'provider'), { from, to });
      }
      default: {
        const providerId = required(values.provider, 'provider');
        const environment = required(values.environment, 'environment');
        if (!(ENVIRONMENTS as readonly string[]).includes(environment))
          throw new UsageError('--environment must be sandbox or live');
        const rotated = await providers.rotateKey(providerId, environment as Environment);
        return { providerId, environment, key: rotated.key, revokedKeys: rotated.revoked };
      }
    }
  } finally {
    await database.close();
  }
}

run(process.argv.slice(2))
  .then((result) => {
    process.stdout.write(result === HELP ? `${USAGE}\n` : `${JSON.stringify(result, null, 2)}\n`);
    process.exit(0);
  })
  .catch((error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n${USAGE}\n`);
      process.exit(2);
    }
    const message = error instanceof ConfigError || error instanceof Error ? error.message : String(error);
    process.stderr.write(`${message}\n`);
    process.exit(1);
  });
