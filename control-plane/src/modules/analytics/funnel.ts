import { divideHalfEven } from '@mcp-meter/contracts/pricing';
import type { PaywallShownRow } from '@mcp-meter/contracts/usage';

/**
 * The paywall funnel as arithmetic: paywalls shown (calls the paywall answered, by the form and
 * era the client saw) → checkout sessions offered → their pages opened → paid; per form and per
 * product and plan, with conversion and the time from the paywall's first showing to payment.
 */

/** What the funnel needs of a checkout session the paywall offered. */
export interface OfferedSession {
  id: string;
  planId: string | null;
  kind: 'plan' | 'topup' | 'setup';
  openedAt: Date | null;
  /** Set once paid. */
  paidAt: Date | null;
}

export interface Stage {
  /** Calls the paywall answered. */
  shown: number;
  /** Checkout sessions offered (concurrent paywalls of one customer share one). */
  offered: number;
  opened: number;
  paid: number;
  /** opened ÷ offered and paid ÷ offered, in basis points, half to even; null with none offered. */
  openRateBasisPoints: number | null;
  conversionBasisPoints: number | null;
}

export interface TimeToPay {
  paid: number;
  /** Nearest rank, in seconds (millisecond precision). */
  medianSeconds: number;
  p90Seconds: number;
}

const bps = (a: number, b: number) =>
  b === 0 ? null : Number(divideHalfEven(BigInt(a) * 10_000n, BigInt(b)));

/** Sums of rows and the sessions they offered (each session once). */
class Tally {
  shown = 0;
  sessions = new Set<string>();

  add(row: PaywallShownRow) {
    this.shown += row.shown;
    if (row.checkoutSessionId !== '') this.sessions.add(row.checkoutSessionId);
  }

  stage(sessions: Map<string, OfferedSession>): Stage {
    let opened = 0;
    let paid = 0;
    let offered = 0;
    for (const id of this.sessions) {
      const session = sessions.get(id);
      if (session === undefined) continue;
      offered++;
      if (session.openedAt !== null) opened++;
      if (session.paidAt !== null) paid++;
    }
    return {
      shown: this.shown,
      offered,
      opened,
      paid,
      openRateBasisPoints: bps(opened, offered),
      conversionBasisPoints: bps(paid, offered),
    };
  }
}

/** The smallest value with at least `level` of the values at or below it. */
function nearestRank(sorted: number[], level: number): number {
  return sorted[Math.max(0, Math.ceil(level * sorted.length) - 1)] as number;
}

function timeToPay(ids: Iterable<string>, sessions: Map<string, OfferedSession>, first: Map<string, number>) {
  const waits: number[] = [];
  for (const id of ids) {
    const paidAt = sessions.get(id)?.paidAt;
    const shownAt = first.get(id);
    if (paidAt == null || shownAt === undefined) continue;
    waits.push(Math.max(0, paidAt.getTime() - shownAt));
  }
  if (waits.length === 0) return null;
  waits.sort((a, b) => a - b);
  return {
    paid: waits.length,
    medianSeconds: nearestRank(waits, 0.5) / 1000,
    p90Seconds: nearestRank(waits, 0.9) / 1000,
  };
}

/**
 * The funnel of `rows` (the store's paywall records, grouped) and the sessions they offered.
 * Sessions the rows name but `sessions` lacks (another tenant's, or removed) count nowhere.
 */
export function funnelOf(rows: readonly PaywallShownRow[], sessions: Map<string, OfferedSession>) {
  const total = new Tally();
  const forms = new Map<string, { era: string; form: string; tally: Tally }>();
  const plans = new Map<
    string,
    { productId: string; planId: string | null; kind: string | null; tally: Tally }
  >();
  const firstShown = new Map<string, number>();
  for (const row of rows) {
    total.add(row);
    const formKey = `${row.era}\u0000${row.form}`;
    const byForm = forms.get(formKey) ?? { era: row.era, form: row.form, tally: new Tally() };
    byForm.tally.add(row);
    forms.set(formKey, byForm);
    const session = sessions.get(row.checkoutSessionId);
    const planId = session?.planId ?? null;
    const kind = session?.kind ?? null;
    const planKey = `${row.productId}\u0000${planId ?? kind ?? ''}`;
    const byPlan = plans.get(planKey) ?? { productId: row.productId, planId, kind, tally: new Tally() };
    byPlan.tally.add(row);
    plans.set(planKey, byPlan);
    if (row.checkoutSessionId !== '') {
      const known = firstShown.get(row.checkoutSessionId);
      if (known === undefined || row.firstShownMs < known)
        firstShown.set(row.checkoutSessionId, row.firstShownMs);
    }
  }
  return {
    totals: { ...total.stage(sessions), timeToPay: timeToPay(total.sessions, sessions, firstShown) },
    byForm: [...forms.values()]
      .map((f) => ({ era: f.era, form: f.form, ...f.tally.stage(sessions) }))
      .sort((a, b) => b.shown - a.shown || (a.era + a.form < b.era + b.form ? -1 : 1)),
    byPlan: [...plans.values()]
      .map((p) => ({
        productId: p.productId,
        planId: p.planId,
        kind: p.kind,
        ...p.tally.stage(sessions),
        timeToPay: timeToPay(p.tally.sessions, sessions, firstShown),
      }))
      .sort(
        (a, b) => b.shown - a.shown || (`${a.productId}${a.planId}` < `${b.productId}${b.planId}` ? -1 : 1),
      ),
  };
}
