import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import { CustomerEmailSettings, CustomerEmailUpdate, CustomerMailPage, CustomerMailQuery } from './schemas';
import type { CustomerEmails } from './service';

export function customerEmailRoutes(mails: CustomerEmails) {
  return async (app: App) => {
    const tags = ['customer-emails'];
    app.get(
      '/v1/sdk/customer-emails',
      {
        schema: {
          tags,
          summary: 'Which billing mails go to this environment’s customers',
          response: { 200: CustomerEmailSettings, ...errorResponses },
        },
      },
      async (request) => mails.settings(authOf(request)),
    );
    app.patch(
      '/v1/sdk/customer-emails',
      {
        schema: {
          tags,
          summary: 'Turns billing mails to customers on or off, kind by kind',
          body: CustomerEmailUpdate,
          response: { 200: CustomerEmailSettings, ...errorResponses },
        },
      },
      async (request) => mails.update(authOf(request), request.body),
    );
    app.get(
      '/v1/sdk/customer-emails/messages',
      {
        schema: {
          tags,
          summary: 'The billing mails sent, or to be sent, to customers, newest first',
          querystring: CustomerMailQuery,
          response: { 200: CustomerMailPage, ...errorResponses },
        },
      },
      async (request) => mails.list(authOf(request), request.query),
    );
  };
}
