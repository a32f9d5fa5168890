import { expect } from 'vitest';
import type { injectClient } from './control-plane';

/**
 * A product sold from credits, as the auto top-up and portal tests sell it: a pre-paid plan of
 * one credit a call, in dollars, whose top-up pack is 50 credits for $5.00.
 */
export async function creditsProduct(
  api: ReturnType<typeof injectClient>,
  names: { product: string; plan: string } = { product: 'Search', plan: 'Credits' },
): Promise<{ product: string; plan: string }> {
  const product = (await api('POST', '/v1/ui/products', { name: names.product })).body.id as string;
  const plan = await api('POST', `/v1/ui/products/${product}/plans`, {
    name: names.plan,
    type: 'usage-based',
    billingModel: 'pre-paid',
    creditsPerUnit: 1,
    currency: 'usd',
    topUp: { credits: 50, amount: 500 },
  });
  expect(plan.status).toBe(201);
  return { product, plan: plan.body.id as string };
}
