import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import type { CancellationAnalytics as Cancellations } from './cancellations';
import type { RevenueAnalytics as Revenue } from './revenue';
import {
  CancellationAnalytics,
  CancellationAnalyticsQuery,
  FunnelQuery,
  PaywallFunnel,
  RevenueAnalytics,
  RevenueAnalyticsQuery,
  ToolAnalytics,
  ToolAnalyticsQuery,
  UsageAnalytics,
  UsageAnalyticsQuery,
} from './schemas';
import type { AnalyticsService } from './service';

export function analyticsRoutes(analytics: AnalyticsService, revenue: Revenue, cancellations: Cancellations) {
  return async (app: App) => {
    const tags = ['analytics'];
    app.get(
      '/v1/ui/analytics/usage',
      {
        schema: {
          tags,
          summary:
            'Calls and units over time in a time zone, grouped by tool, customer, product, plan, server, outcome or environment',
          querystring: UsageAnalyticsQuery,
          response: { 200: UsageAnalytics, 503: Problem, ...errorResponses },
        },
      },
      async (request) => analytics.usage(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/analytics/tools',
      {
        schema: {
          tags,
          summary: 'Per tool: calls, errors, error rate and origin latency percentiles',
          querystring: ToolAnalyticsQuery,
          response: { 200: ToolAnalytics, 503: Problem, ...errorResponses },
        },
      },
      async (request) => analytics.tools(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/analytics/funnel',
      {
        schema: {
          tags,
          summary:
            'The paywall funnel: paywalls shown, checkouts offered, opened and paid, by form and by plan',
          querystring: FunnelQuery,
          response: { 200: PaywallFunnel, 503: Problem, ...errorResponses },
        },
      },
      async (request) => analytics.funnel(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/analytics/revenue',
      {
        schema: {
          tags,
          summary:
            'Per month: MRR and its movements, active and paying customers, churn, revenue by kind, refunds and disputes',
          querystring: RevenueAnalyticsQuery,
          response: { 200: RevenueAnalytics, ...errorResponses },
        },
      },
      async (request) => revenue.report(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/analytics/cancellations',
      {
        schema: {
          tags,
          summary:
            'Why customers cancelled: cancellations in a window by reason and by the feedback they gave, and their newest comments',
          querystring: CancellationAnalyticsQuery,
          response: { 200: CancellationAnalytics, ...errorResponses },
        },
      },
      async (request) => cancellations.report(authOf(request), request.query),
    );
  };
}
