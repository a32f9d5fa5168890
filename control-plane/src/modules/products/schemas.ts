import { type Static, Type } from '@sinclair/typebox';
import { Metadata, page, stringEnum, Timestamp } from '../../http/schemas';

export const PRODUCT_TYPES = ['api', 'mcp_server', 'software', 'data', 'other'] as const;

const Reference = Type.String({
  pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$',
  description: 'Your own unique handle for the product (letters, digits, _ . -); defaults to the id',
});
const Name = Type.String({ minLength: 1, maxLength: 200 });
const Description = Type.String({ maxLength: 2000 });
const ProductType = stringEnum(PRODUCT_TYPES, 'What is sold');
const PaywallPromotionCodes = Type.Boolean({
  description:
    'The checkout sessions the paywall opens for this product’s plans offer a promotion-code field (as allowPromotionCodes on a session); default false',
});
const PortalPromotionCodes = Type.Boolean({
  description:
    'In the customer portal, a customer changing to another of this product’s plans, or buying its credit packs, may apply a promotion code; default false',
});
const RetentionCoupon = Type.Union(
  [Type.String({ minLength: 1, maxLength: 100, description: 'A coupon (cpn_… or its code)' }), Type.Null()],
  {
    description:
      'The coupon the customer portal offers a customer of this product about to cancel, instead of cancelling (kept as its id); null for none',
  },
);

export const ProductCreate = Type.Object(
  {
    name: Name,
    description: Type.Optional(Description),
    reference: Type.Optional(Reference),
    productType: Type.Optional(ProductType),
    isMcpPay: Type.Optional(Type.Boolean({ description: 'Sold through the MCP proxy' })),
    paywallPromotionCodes: Type.Optional(PaywallPromotionCodes),
    portalPromotionCodes: Type.Optional(PortalPromotionCodes),
    retentionCoupon: Type.Optional(RetentionCoupon),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type ProductCreate = Static<typeof ProductCreate>;

export const ProductUpdate = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Type.Union([Description, Type.Null()])),
    reference: Type.Optional(Reference),
    productType: Type.Optional(ProductType),
    isMcpPay: Type.Optional(Type.Boolean()),
    paywallPromotionCodes: Type.Optional(PaywallPromotionCodes),
    portalPromotionCodes: Type.Optional(PortalPromotionCodes),
    retentionCoupon: Type.Optional(RetentionCoupon),
    metadata: Type.Optional(Metadata),
    status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('archived')])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type ProductUpdate = Static<typeof ProductUpdate>;

export const Product = Type.Object({
  id: Type.String(),
  reference: Type.String(),
  name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  productType: Type.String(),
  isMcpPay: Type.Boolean(),
  paywallPromotionCodes: PaywallPromotionCodes,
  portalPromotionCodes: PortalPromotionCodes,
  retentionCoupon: Type.Union([Type.String(), Type.Null()], {
    description: 'The coupon (cpn_…) the portal offers a customer about to cancel; null for none',
  }),
  status: Type.Union([Type.Literal('active'), Type.Literal('archived')]),
  metadata: Type.Record(Type.String(), Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type Product = Static<typeof Product>;

export const ProductPage = page(Product);

export const ProductParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 100, description: 'Product id (prd_…) or reference' }),
});
