import { describe, expect, it } from 'vitest';
import { funnelOf, type OfferedSession } from '../src/modules/analytics/funnel';

const row = (
  form: string,
  era: string,
  session: string,
  shown: number,
  firstShownMs: number,
  productId = 'prd_a',
) => ({
  form,
  era,
  checkoutSessionId: session,
  productId,
  shown,
  firstShownMs,
});
const session = (
  id: string,
  planId: string | null,
  opened: number | null,
  paid: number | null,
): OfferedSession => ({
  id,
  planId,
  kind: planId === null ? 'topup' : 'plan',
  openedAt: opened === null ? null : new Date(opened),
  paidAt: paid === null ? null : new Date(paid),
});

describe('the paywall funnel', () => {
  it('counts calls shown, sessions once each, and time to pay from the first showing', () => {
    const sessions = new Map(
      [
        session('cs_1', 'pln_pro', 2_000, 5_000),
        session('cs_2', 'pln_pro', 9_000, null),
        session('cs_3', null, null, null),
        session('cs_4', 'pln_pro', 30_000, 40_000),
      ].map((s) => [s.id, s]),
    );
    const funnel = funnelOf(
      [
        // cs_1 shown three times in two forms: first at 1 s, paid at 5 s.
        row('url_elicitation', 'modern', 'cs_1', 2, 1_000),
        row('text_link', 'modern', 'cs_1', 1, 3_000),
        row('text_link', 'legacy', 'cs_2', 4, 8_000),
        row('error_32042', 'legacy', 'cs_3', 1, 10_000),
        row('error_32042', 'legacy', 'cs_4', 1, 20_000),
        // No checkout could be offered; and a session of another tenant (absent): shown only.
        row('text_link', 'legacy', '', 5, 11_000),
        row('text_link', 'legacy', 'cs_other', 1, 12_000),
      ],
      sessions,
    );
    expect(funnel.totals).toEqual({
      shown: 15,
      offered: 4,
      opened: 3,
      paid: 2,
      openRateBasisPoints: 7500,
      conversionBasisPoints: 5000,
      // 4 s (cs_1) and 20 s (cs_4): nearest-rank median 4 s, p90 20 s.
      timeToPay: { paid: 2, medianSeconds: 4, p90Seconds: 20 },
    });
    expect(funnel.byForm.map((f) => [f.era, f.form, f.shown, f.offered, f.paid])).toEqual([
      ['legacy', 'text_link', 10, 1, 0],
      ['legacy', 'error_32042', 2, 2, 1],
      ['modern', 'url_elicitation', 2, 1, 1],
      ['modern', 'text_link', 1, 1, 1],
    ]);
    expect(funnel.byPlan.map((p) => [p.planId, p.kind, p.shown, p.offered, p.paid])).toEqual([
      ['pln_pro', 'plan', 8, 3, 2],
      [null, null, 6, 0, 0],
      [null, 'topup', 1, 1, 0],
    ]);
    expect(funnel.byPlan[1]?.conversionBasisPoints).toBeNull();
    expect(funnel.byPlan[1]?.timeToPay).toBeNull();
  });
});
