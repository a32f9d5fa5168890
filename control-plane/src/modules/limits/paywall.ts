import type { Logger } from '@mcp-meter/contracts/kit';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Clock } from '../../clock';
import { type Pool, withAdvisoryLock } from '../../db/pool';
import { ConflictError, NotFoundError } from '../../errors';
import { findOpenPlanSession, findOpenTopupSession } from '../checkout/repository';
import type { CheckoutSessions } from '../checkout/sessions';
import { findPlan, type PlanRow, plansOnSale, settingsOf } from '../plans/repository';
import { signInPath } from '../portal/page';
import { findProduct } from '../products/repository';
import { canSignIn } from '../sign-in/repository';

/**
 * What a refused customer is offered: a checkout session for the plan that lifts the refusal
 * (the tool's plan, a higher limit, the first plan on sale) or for the credit top-up of the plan
 * it is on, one shared by concurrent paywalls. The proxy asks for it (`POST /internal/v1/paywall`)
 * and the SDK limit check names it in its answer.
 */

export type PaywallReason = 'limit_reached' | 'plan_required' | 'no_plan' | 'credits_exhausted';

export interface PaywallRequest {
  providerId: string;
  environment: Environment;
  customerId: string;
  productId: string;
  reason: PaywallReason;
  /** The plans that open the tool (plan_required), first choice first. */
  planIds?: string[] | undefined;
  /** The plan whose limit was reached (limit_reached), or whose credits ran out (credits_exhausted). */
  planId?: string | undefined;
}

export interface Paywall {
  checkoutUrl: string;
  checkoutSessionId: string;
  product: { id: string; name: string };
  planId: string;
  /**
   * The customer portal's sign-in for this provider, when the customer has an account there (MCP
   * sign-in made one): where they see their usage, invoices and credits. Null otherwise.
   */
  portalUrl: string | null;
}

export class PaywallOffers {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly checkout: CheckoutSessions,
    private readonly logger: Logger,
  ) {}

  async paywall(request: PaywallRequest): Promise<Paywall> {
    const auth = { providerId: request.providerId, environment: request.environment };
    const product = await findProduct(this.pool, auth, request.productId);
    if (product === undefined)
      throw new NotFoundError('product_not_found', `No product ${request.productId}`);
    if (request.reason === 'credits_exhausted') return this.topUpPaywall(request, product);
    const plans = await plansOnSale(this.pool, product.id);
    let choice: PlanRow | undefined;
    if (request.reason === 'plan_required') {
      for (const id of request.planIds ?? []) {
        choice = plans.find((p) => p.id === id);
        if (choice !== undefined) break;
      }
    } else if (request.reason === 'limit_reached') {
      // The plan reached may be off sale (archived) and so not among `plans`: read it whatever its status.
      const current =
        request.planId === undefined ? undefined : await findPlan(this.pool, auth, request.planId);
      const currentLimit = current?.usage_limit;
      if (currentLimit === undefined || currentLimit === null)
        throw new ConflictError(
          'no_higher_plan',
          'The plan whose limit was reached is not known or has no limit',
        );
      choice = plans.find(
        (p) => p.id !== current?.id && (p.usage_limit === null || p.usage_limit > currentLimit),
      );
      if (choice === undefined)
        throw new ConflictError('no_higher_plan', `No plan on sale has a higher limit than ${currentLimit}`);
    } else {
      choice = plans[0];
    }
    if (choice === undefined)
      throw new NotFoundError('plan_not_found', `Product ${product.id} has no plan on sale`);
    // Concurrent paywalls (several proxies) for the same customer and plan share one session.
    const openUntil = new Date(this.clock.now().getTime() + 10 * 60_000);
    const { sessionId, url } = await withAdvisoryLock(
      this.pool,
      `paywall:${request.customerId}:${choice.id}`,
      async (client) => {
        // A session without the product's promotion-code field (made before it changed) is not reused.
        const codes = product.paywall_promotion_codes;
        const open = await findOpenPlanSession(client, request.customerId, choice.id, openUntil, codes);
        if (open !== undefined) return { sessionId: open, url: this.checkout.urlOf(open) };
        const session = await this.checkout.create(
          auth,
          {
            customerRef: request.customerId,
            planRef: choice.id,
            allowPromotionCodes: codes,
          },
          client,
          'paywall',
        );
        return { sessionId: session.id, url: session.url };
      },
    );
    this.logger.debug(
      { customer: request.customerId, session: sessionId, reason: request.reason },
      'paywall',
    );
    return {
      checkoutUrl: url,
      checkoutSessionId: sessionId,
      product: { id: product.id, name: product.name },
      planId: choice.id,
      portalUrl: await this.portalUrl(request),
    };
  }

  /**
   * Credits ran out: a checkout session for the top-up pack of the plan the customer is on,
   * reusing an open one for the same pack (with the product's promotion-code field as it is
   * now); 409 no_top_up when the plan offers none.
   */
  private async topUpPaywall(
    request: PaywallRequest,
    product: { id: string; name: string; paywall_promotion_codes: boolean },
  ): Promise<Paywall> {
    const auth = { providerId: request.providerId, environment: request.environment };
    const plan = request.planId === undefined ? undefined : await findPlan(this.pool, auth, request.planId);
    const pack = plan === undefined ? null : settingsOf(plan).topUp;
    if (plan === undefined || pack === null)
      throw new ConflictError('no_top_up', 'The plan offers no credit top-up; the provider can add credits');
    const openUntil = new Date(this.clock.now().getTime() + 10 * 60_000);
    const { sessionId, url } = await withAdvisoryLock(
      this.pool,
      `paywall:topup:${request.customerId}`,
      async (client) => {
        const codes = product.paywall_promotion_codes;
        const open = await findOpenTopupSession(client, request.customerId, pack, openUntil, codes);
        if (open !== undefined) return { sessionId: open, url: this.checkout.urlOf(open) };
        const session = await this.checkout.create(
          auth,
          {
            customerRef: request.customerId,
            topup: { credits: pack.credits, amount: pack.amount, currency: plan.currency },
            allowPromotionCodes: codes,
          },
          client,
          'paywall',
        );
        return { sessionId: session.id, url: session.url };
      },
    );
    return {
      checkoutUrl: url,
      checkoutSessionId: sessionId,
      product: { id: product.id, name: product.name },
      planId: plan.id,
      portalUrl: await this.portalUrl(request),
    };
  }

  /**
   * The portal's sign-in, offered beside the checkout to a customer who can sign in there: with
   * the account MCP sign-in made, or by a code mailed to the address the customer has.
   */
  private async portalUrl(request: PaywallRequest): Promise<string | null> {
    if (!(await canSignIn(this.pool, request.customerId))) return null;
    return `${this.checkout.publicUrl}${signInPath(request)}`;
  }
}

export const paywallFields = (p: Paywall) => ({
  checkoutUrl: p.checkoutUrl,
  checkoutSessionId: p.checkoutSessionId,
  offeredPlanId: p.planId,
  ...(p.portalUrl === null ? {} : { portalUrl: p.portalUrl }),
});
