// Creates a database if it is missing: `tsx deploy/create-database.ts <admin url> <name>`.
// (psql may not be installed; pg from npm always is.)
import pg from 'pg';

const [url, name] = process.argv.slice(2);
if (url === undefined || name === undefined || !/^[a-z_][a-z0-9_]*$/.test(name)) {
  console.error('usage: create-database.ts <admin url> <name>');
  process.exit(2);
}
const client = new pg.Client({ connectionString: url });
await client.connect();
const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${name}`);
await client.end();
