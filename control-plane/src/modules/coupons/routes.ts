import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { Purchase, PurchaseParams } from '../purchases/schemas';
import type { PurchaseService } from '../purchases/service';
import {
  Coupon,
  CouponCreate,
  CouponListQuery,
  CouponPage,
  CouponParams,
  CouponUpdate,
  DiscountBody,
} from './schemas';
import type { CouponService } from './service';

export function couponRoutes(coupons: CouponService, purchases: PurchaseService) {
  return async (app: App) => {
    const tags = ['coupons'];
    app.post(
      '/v1/sdk/coupons',
      {
        config: { idempotency: 'optional' },
        schema: {
          tags,
          summary: 'Create a coupon: a percentage or an amount off a purchase’s invoices',
          body: CouponCreate,
          response: { 201: Coupon, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.code(201).send(await coupons.create(authOf(request), request.body)),
    );
    app.get(
      '/v1/sdk/coupons',
      {
        schema: {
          tags,
          summary: 'List coupons, newest first',
          querystring: CouponListQuery,
          response: { 200: CouponPage, ...errorResponses },
        },
      },
      async (request) => coupons.list(authOf(request), request.query),
    );
    app.get(
      '/v1/sdk/coupons/:id',
      {
        schema: {
          tags,
          summary: 'Get a coupon by id or by its code',
          params: CouponParams,
          response: { 200: Coupon, ...errorResponses },
        },
      },
      async (request) => coupons.get(authOf(request), request.params.id),
    );
    app.patch(
      '/v1/sdk/coupons/:id',
      {
        schema: {
          tags,
          summary: 'Rename a coupon or change its metadata (its terms do not change)',
          params: CouponParams,
          body: CouponUpdate,
          response: { 200: Coupon, ...errorResponses },
        },
      },
      async (request) => coupons.update(authOf(request), request.params.id, request.body),
    );
    app.post(
      '/v1/sdk/coupons/:id/archive',
      {
        schema: {
          tags,
          summary: 'Archive a coupon: no more redemptions; discounts given stay',
          params: CouponParams,
          response: { 200: Coupon, ...errorResponses },
        },
      },
      async (request) => coupons.archive(authOf(request), request.params.id),
    );
    app.post(
      '/v1/sdk/purchases/:ref/discount',
      {
        config: { idempotency: 'optional' },
        schema: {
          tags,
          summary: 'Redeem a coupon on a purchase in force, replacing its discount',
          params: PurchaseParams,
          body: DiscountBody,
          response: { 200: Purchase, 409: Problem, ...errorResponses },
        },
      },
      async (request) => purchases.discounts.apply(authOf(request), request.params.ref, request.body.coupon),
    );
    app.delete(
      '/v1/sdk/purchases/:ref/discount',
      {
        schema: {
          tags,
          summary: 'Remove a purchase’s discount: its next invoices are charged in full',
          params: PurchaseParams,
          response: { 200: Purchase, ...errorResponses },
        },
      },
      async (request) => purchases.discounts.remove(authOf(request), request.params.ref),
    );
  };
}
