import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import { Event, EventPage, EventParams, EventQuery } from './schemas';
import type { EventService } from './service';

export function eventRoutes(events: EventService) {
  return async (app: App) => {
    const tags = ['webhooks'];
    app.get(
      '/v1/events',
      {
        schema: {
          tags,
          summary: 'Events, newest first: all, a customer’s, or some types’',
          querystring: EventQuery,
          response: { 200: EventPage, ...errorResponses },
        },
      },
      async (request) => events.list(authOf(request), request.query),
    );
    app.get(
      '/v1/events/:id',
      {
        schema: {
          tags,
          summary: 'One event, as webhooks deliver it',
          params: EventParams,
          response: { 200: Event, ...errorResponses },
        },
      },
      async (request) => events.get(authOf(request), request.params.id),
    );
  };
}
