import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

/** The names of products and plans by id, within one tenant (ids it does not hold are absent). */
export async function namesOf(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  productIds: string[],
  planIds: string[],
): Promise<{ products: Map<string, string>; plans: Map<string, string> }> {
  const { rows } = await db.query<{ kind: 'product' | 'plan'; id: string; name: string }>(
    `SELECT 'product' AS kind, id, name FROM products WHERE provider_id = $1 AND environment = $2 AND id = ANY($3::text[])
     UNION ALL
     SELECT 'plan' AS kind, id, name FROM plans WHERE provider_id = $1 AND environment = $2 AND id = ANY($4::text[])`,
    [tenant.providerId, tenant.environment, productIds, planIds],
  );
  const of = (kind: 'product' | 'plan') =>
    new Map(rows.filter((r) => r.kind === kind).map((r) => [r.id, r.name]));
  return { products: of('product'), plans: of('plan') };
}
