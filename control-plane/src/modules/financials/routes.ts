import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import { CashflowReport, PnlReport, ReportQuery } from './schemas';
import type { FinancialService } from './service';

export function financialRoutes(financials: FinancialService) {
  return async (app: App) => {
    const tags = ['financials'];
    app.get(
      '/v1/ui/financials/pnl',
      {
        schema: {
          tags,
          summary: 'Profit and loss of a period, with the prior period and each month, from the ledger',
          querystring: ReportQuery,
          response: { 200: PnlReport, ...errorResponses },
        },
      },
      async (request) => financials.pnl(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/financials/cashflow',
      {
        schema: {
          tags,
          summary: "Cash flow of the provider's processor balance over a period, and each month",
          querystring: ReportQuery,
          response: { 200: CashflowReport, ...errorResponses },
        },
      },
      async (request) => financials.cashflow(authOf(request), request.query),
    );
  };
}
