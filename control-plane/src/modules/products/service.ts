import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type Queryable } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { findCoupon } from '../coupons/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findProduct, insertProduct, listProducts, type ProductRow, updateProduct } from './repository';
import type { Product, ProductCreate, ProductUpdate } from './schemas';

export const toProduct = (row: ProductRow): Product => ({
  id: row.id,
  reference: row.reference,
  name: row.name,
  description: row.description,
  productType: row.product_type,
  isMcpPay: row.is_mcp_pay,
  paywallPromotionCodes: row.paywall_promotion_codes,
  portalPromotionCodes: row.portal_promotion_codes,
  retentionCoupon: row.retention_coupon_id,
  status: row.status,
  metadata: row.metadata,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

/** Payload of `product.*` events (spec 6.5). */
const eventObject = (row: ProductRow) => ({
  id: row.id,
  reference: row.reference,
  name: row.name,
  status: row.status,
  productType: row.product_type,
  isMcpPay: row.is_mcp_pay,
  paywallPromotionCodes: row.paywall_promotion_codes,
  portalPromotionCodes: row.portal_promotion_codes,
  retentionCoupon: row.retention_coupon_id,
  created: unixSeconds(row.created_at),
});

function checkReference(reference: string | undefined): void {
  // An id-shaped reference could name another product; ids and references share one lookup.
  if (reference !== undefined && /^[a-z]{3}_/.test(reference)) {
    throw new ValidationError([
      { path: '/reference', message: 'must not start with an id prefix such as prd_', location: 'body' },
    ]);
  }
}

/** The coupon a product's retention offer names (id or code), as its id: 404 unknown, 409 archived. */
async function retentionCouponOf(
  db: Queryable,
  auth: AuthContext,
  ref: string | null,
): Promise<string | null> {
  if (ref === null) return null;
  const coupon = await findCoupon(db, auth, ref);
  if (coupon === undefined) throw new NotFoundError('coupon_not_found', `No coupon ${ref}`);
  if (coupon.status !== 'active')
    throw new ConflictError('coupon_not_redeemable', `Coupon ${coupon.id} is archived: no one can redeem it`);
  return coupon.id;
}

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

export class ProductService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async create(auth: AuthContext, input: ProductCreate): Promise<Product> {
    checkReference(input.reference);
    const at = this.clock.now();
    const id = newId(ID.product);
    try {
      const row = await inTransaction(this.pool, async (tx) => {
        const inserted = await insertProduct(tx, {
          id,
          provider_id: auth.providerId,
          environment: auth.environment,
          reference: input.reference ?? id,
          name: input.name,
          description: input.description ?? null,
          product_type: input.productType ?? 'api',
          is_mcp_pay: input.isMcpPay ?? false,
          paywall_promotion_codes: input.paywallPromotionCodes ?? false,
          portal_promotion_codes: input.portalPromotionCodes ?? false,
          retention_coupon_id: await retentionCouponOf(tx, auth, input.retentionCoupon ?? null),
          metadata: input.metadata ?? {},
          status: 'active',
          created_at: at,
          updated_at: at,
        });
        await writeEvent(tx, { ...auth, type: 'product.created', object: eventObject(inserted), at });
        return inserted;
      });
      return toProduct(row);
    } catch (error) {
      if (isUniqueViolation(error))
        throw new ConflictError('reference_taken', `Reference "${input.reference}" is already used`);
      throw error;
    }
  }

  async get(auth: AuthContext, ref: string): Promise<Product> {
    const row = await findProduct(this.pool, auth, ref);
    if (row === undefined) throw new NotFoundError('product_not_found', `No product ${ref}`);
    return toProduct(row);
  }

  async list(
    auth: AuthContext,
    query: { limit: number; cursor?: string | undefined; status?: string | undefined },
  ) {
    const rows = await listProducts(this.pool, auth, {
      after: decodeCursor(query.cursor),
      limit: query.limit,
      status: query.status,
    });
    return toPage(rows, query.limit, toProduct);
  }

  async update(auth: AuthContext, ref: string, patch: ProductUpdate): Promise<Product> {
    checkReference(patch.reference);
    const at = this.clock.now();
    try {
      const row = await inTransaction(this.pool, async (tx) => {
        const current = await findProduct(tx, auth, ref, { forUpdate: true });
        if (current === undefined) throw new NotFoundError('product_not_found', `No product ${ref}`);
        const next: ProductRow = {
          ...current,
          reference: patch.reference ?? current.reference,
          name: patch.name ?? current.name,
          description: patch.description === undefined ? current.description : patch.description,
          product_type: patch.productType ?? current.product_type,
          is_mcp_pay: patch.isMcpPay ?? current.is_mcp_pay,
          paywall_promotion_codes: patch.paywallPromotionCodes ?? current.paywall_promotion_codes,
          portal_promotion_codes: patch.portalPromotionCodes ?? current.portal_promotion_codes,
          retention_coupon_id:
            patch.retentionCoupon === undefined
              ? current.retention_coupon_id
              : await retentionCouponOf(tx, auth, patch.retentionCoupon),
          metadata: patch.metadata ?? current.metadata,
          status: patch.status ?? current.status,
          updated_at: at,
        };
        const updated = await updateProduct(tx, next);
        const archived = current.status !== 'archived' && updated.status === 'archived';
        const previous: Record<string, unknown> = {};
        for (const [key, value] of Object.entries(eventObject(current))) {
          if (value !== eventObject(updated)[key as keyof ReturnType<typeof eventObject>])
            previous[key] = value;
        }
        await writeEvent(tx, {
          ...auth,
          type: archived ? 'product.archived' : 'product.updated',
          object: eventObject(updated),
          previousAttributes: previous,
          at,
        });
        return updated;
      });
      return toProduct(row);
    } catch (error) {
      if (isUniqueViolation(error))
        throw new ConflictError('reference_taken', `Reference "${patch.reference}" is already used`);
      throw error;
    }
  }

  /** Idempotent: archiving an archived product changes nothing and writes no event. */
  async archive(auth: AuthContext, ref: string): Promise<Product> {
    const current = await this.get(auth, ref);
    if (current.status === 'archived') return current;
    return this.update(auth, ref, { status: 'archived' });
  }
}
