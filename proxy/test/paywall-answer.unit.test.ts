import { describe, expect, it } from 'vitest';
import { PAYWALL_META_KEY, paywallAnswer } from '../src/paywall/answer';

/** The paywall's words and `_meta` offer the customer portal beside the checkout when there is one. */
describe('the paywall answer', () => {
  const call = { id: 7, tool: 'search' };
  const verdict = { reason: 'limit_reached' as const, limit: 5, used: 5 };
  const offer = {
    checkoutUrl: 'https://cp.example/checkout/cs_1',
    checkoutSessionId: 'cs_1',
    product: { id: 'prd_1', name: 'Search' },
  };
  const legacyText = { modern: false, urlElicitation: false };

  it('names the portal sign-in in its text and _meta for a customer with an account', () => {
    const answer = paywallAnswer(
      call,
      verdict,
      { ...offer, portalUrl: 'https://cp.example/portal/sign-in/prv_1?environment=sandbox' },
      legacyText,
    ) as { result: { content: Array<{ text: string }>; _meta: Record<string, Record<string, unknown>> } };
    expect(answer.result.content[0]?.text).toBe(
      'You have used all 5 calls your plan includes for this period. To continue, complete checkout for Search: https://cp.example/checkout/cs_1 Your usage, invoices and credits: https://cp.example/portal/sign-in/prv_1?environment=sandbox',
    );
    expect(answer.result._meta[PAYWALL_META_KEY]?.portalUrl).toBe(
      'https://cp.example/portal/sign-in/prv_1?environment=sandbox',
    );
  });

  it('says nothing of a portal without one', () => {
    for (const portalUrl of [null, undefined]) {
      const answer = paywallAnswer(call, verdict, { ...offer, portalUrl }, legacyText) as {
        result: { content: Array<{ text: string }>; _meta: Record<string, Record<string, unknown>> };
      };
      expect(answer.result.content[0]?.text).not.toContain('portal');
      expect(answer.result._meta[PAYWALL_META_KEY]?.portalUrl).toBeNull();
    }
  });
});
