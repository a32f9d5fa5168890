import type { CounterScope, CounterSeed } from '@mcp-meter/contracts/limits';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import { type Dispatcher, request } from 'undici';

export interface PaywallAsk {
  providerId: string;
  environment: Environment;
  customerId: string;
  productId: string;
  reason: 'limit_reached' | 'plan_required' | 'no_plan' | 'credits_exhausted';
  planIds?: string[];
  planId?: string;
}

export interface PaywallAnswer {
  checkoutUrl: string;
  checkoutSessionId: string;
  product: { id: string; name: string };
  /** The customer portal's sign-in, when the customer has an account there. */
  portalUrl?: string | null;
}

/**
 * The proxy's calls to the control plane's internal API, all off the hot path: a checkout
 * session when a call hits the paywall (shared by concurrent callers and remembered for a
 * minute, so a burst of refused calls makes one session), and a limit counter's starting value.
 */
export class ControlPlaneLink {
  private readonly paywalls = new Map<string, { answer: Promise<PaywallAnswer | null>; at: number }>();
  requests = 0;

  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    private readonly dispatcher: Dispatcher,
  ) {}

  /** The answer to a POST; `nothingOn` is a status that means "nothing to give" (null). */
  private async post<T>(path: string, body: unknown, nothingOn?: number): Promise<T> {
    this.requests++;
    const response = await request(`${this.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      dispatcher: this.dispatcher,
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    const text = await response.body.text();
    if (response.statusCode === nothingOn) return null as T;
    if (response.statusCode !== 200)
      throw new Error(`control plane ${path} answered ${response.statusCode}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as T;
  }

  /** A checkout session to offer, or null when no plan would lift the refusal (no higher limit). */
  paywall(ask: PaywallAsk): Promise<PaywallAnswer | null> {
    const key = JSON.stringify([
      ask.environment,
      ask.customerId,
      ask.productId,
      ask.reason,
      ask.planId,
      ask.planIds,
    ]);
    const cached = this.paywalls.get(key);
    if (cached !== undefined && Date.now() - cached.at < 60_000) return cached.answer;
    const answer = this.post<PaywallAnswer | null>('/internal/v1/paywall', ask, 409);
    if (this.paywalls.size > 10_000) this.paywalls.clear();
    this.paywalls.set(key, { answer, at: Date.now() });
    answer.catch(() => this.paywalls.delete(key));
    return answer;
  }

  /** Purchases change the plan and so the counter; a paid customer must not get an old session. */
  forgetPaywalls(): void {
    this.paywalls.clear();
  }

  /** Where a customer's credit counter starts: the credits its recorded calls spent. */
  creditSeed(scope: CounterScope): Promise<{ used: number; expiresAtMs: number }> {
    return this.post('/internal/v1/credits/seed', {
      providerId: scope.providerId,
      environment: scope.environment,
      customerId: scope.customerId,
    });
  }

  seed(scope: CounterScope, periodEnd: Date | null): Promise<CounterSeed> {
    return this.post('/internal/v1/limits/seed', {
      providerId: scope.providerId,
      environment: scope.environment,
      customerId: scope.customerId,
      productId: scope.productId,
      planId: scope.planId,
      periodStart: scope.periodStart.toISOString(),
      periodEnd: periodEnd?.toISOString() ?? null,
    });
  }
}
