import { type App, authOf, sandboxAuthOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import {
  Dispute,
  DisputeListQuery,
  DisputePage,
  DisputeParams,
  EvidenceBody,
  SandboxCloseBody,
  SandboxDisputeBody,
} from './schemas';
import type { DisputeService } from './service';

export function disputeRoutes(disputes: DisputeService) {
  return async (app: App) => {
    const tags = ['disputes'];
    app.get(
      '/v1/ui/disputes',
      {
        schema: {
          tags,
          summary: 'List disputes',
          querystring: DisputeListQuery,
          response: { 200: DisputePage, ...errorResponses },
        },
      },
      async (request) => disputes.list(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/disputes/:id',
      {
        schema: {
          tags,
          summary: 'Get a dispute',
          params: DisputeParams,
          response: { 200: Dispute, ...errorResponses },
        },
      },
      async (request) => disputes.get(authOf(request), request.params.id),
    );
    app.post(
      '/v1/ui/disputes/:id/evidence',
      {
        schema: {
          tags,
          summary: 'Answer a dispute with evidence (needs_response → under_review)',
          params: DisputeParams,
          body: EvidenceBody,
          response: { 200: Dispute, 409: Problem, ...errorResponses },
        },
      },
      async (request) => disputes.submitEvidence(authOf(request), request.params.id, request.body.evidence),
    );
    app.post(
      '/v1/sdk/sandbox/disputes',
      {
        schema: {
          tags,
          summary: "Sandbox: the customer's bank disputes a payment (payment.disputed)",
          body: SandboxDisputeBody,
          response: { 201: Dispute, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) =>
        reply.status(201).send(await disputes.open(sandboxAuthOf(request), request.body)),
    );
    app.post(
      '/v1/sdk/sandbox/disputes/:id/close',
      {
        schema: {
          tags,
          summary: 'Sandbox: the bank decides a dispute, won or lost (payment.dispute_closed)',
          params: DisputeParams,
          body: SandboxCloseBody,
          response: { 200: Dispute, 409: Problem, ...errorResponses },
        },
      },
      async (request) => disputes.close(sandboxAuthOf(request), request.params.id, request.body.outcome),
    );
  };
}
