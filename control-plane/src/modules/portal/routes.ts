import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { DomainError, ERROR_STATUS, NotFoundError, ValidationError } from '../../errors';
import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import { cancellationFromForm } from '../purchases/cancellation';
import { SignInError } from '../sign-in/errors';
import { cookieOf } from '../sign-in/oauth-http';
import type { PortalAccount } from './account';
import type { PortalCodes } from './codes';
import type { PortalDetails } from './details';
import { renderEmailCode } from './details-page';
import { type Form, hide, PORTAL_COOKIE, page, parseForms, portalCookie, singleFields } from './http';
import { renderPortal, renderPortalGone, signInPath } from './page';
import { renderCancel, renderChangePlan } from './plan-pages';
import { PortalSession, PortalSessionCreate } from './schemas';
import type { PortalService } from './service';
import { signInPages } from './sign-in-pages';

/** The API operation that makes a portal link (authenticated with the provider's key). */
export function portalSessionRoutes(portal: PortalService) {
  return async (app: App) => {
    app.post(
      '/v1/sdk/portal-sessions',
      {
        // The link's 15 minutes are the customer's real ones, on a test clock too: the portal
        // they open is served at the real time.
        config: { testTime: 'none' },
        schema: {
          tags: ['customer portal'],
          summary: "A single-use link to a customer's portal, valid for 15 minutes",
          body: PortalSessionCreate,
          response: { 201: PortalSession, ...errorResponses },
        },
      },
      async (request, reply) => reply.code(201).send(await portal.createLink(authOf(request), request.body)),
    );
  };
}

const TokenParams = Type.Object({ token: Type.String({ minLength: 1, maxLength: 100 }) });
/** What a change did, named in the redirect after it: from this list only, never echoed. */
const DONE = {
  saved: 'Auto top-up saved.',
  off: 'Auto top-up is off.',
  bought: 'Thank you: your credits are bought.',
  cancelled: 'Your plan will end at the end of its period.',
  alert: 'Alert added.',
  unalerted: 'Alert removed.',
  changed: 'Your plan is changed.',
  ended: 'Your plan has ended.',
  card: 'Your card is saved as the default.',
  default: 'That card is now your default.',
  removed: 'The card is removed.',
  paid: 'Thank you: the invoice is paid.',
  retained: 'Thank you for staying: your discount is applied.',
  details: 'Your details are saved.',
  address: 'Your billing address is saved.',
  taxId: 'The tax ID is added.',
  untaxed: 'The tax ID is removed.',
  email: 'Your email address is changed: mail about your account goes to it from now on.',
} as const;
const PurchaseParams = Type.Object({ purchaseRef: Type.String({ minLength: 1, maxLength: 100 }) });
const ChangeQuery = Type.Object({
  plan: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  code: Type.Optional(Type.String({ maxLength: 100 })),
});
const NoticeQuery = Type.Object({ done: Type.Optional(Type.String({ maxLength: 20 })) });
const CodeQuery = Type.Object({ code: Type.String({ minLength: 1, maxLength: 100 }) });

/** Whole numbers a form field may hold: digits only, within the bounds the API takes. */
function wholeNumber(form: Form, name: string, max: number): number {
  const text = (form[name] ?? '').trim();
  const value = /^\d{1,13}$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= 0 && value <= max))
    throw new ValidationError([
      { path: `/${name}`, message: `must be a whole number from 0 to ${max}`, location: 'body' },
    ]);
  return value;
}

/** The customer's pages: opening a link, the portal itself, its forms. Not part of the API. */
export function portalPageRoutes(
  portal: PortalService,
  account: PortalAccount,
  codes: PortalCodes,
  details: PortalDetails,
  secureCookies: boolean,
) {
  return async (app: App) => {
    parseForms(app);

    app.get(
      '/portal/sessions/:token',
      { schema: { ...hide, params: TokenParams } },
      async (request, reply) => {
        const opened = await portal.open(request.params.token);
        if (opened.kind === 'spent')
          return page(reply)
            .status(410)
            .send(
              renderPortalGone(
                opened.merchant,
                'link',
                opened.tenant === undefined ? undefined : signInPath(opened.tenant),
              ),
            );
        return reply
          .header('set-cookie', portalCookie(opened.secret, secureCookies))
          .header('cache-control', 'no-store')
          .header('referrer-policy', 'no-referrer')
          .redirect('/portal', 303);
      },
    );

    signInPages(app, portal, codes, secureCookies);

    app.get('/portal', { schema: { ...hide, querystring: NoticeQuery } }, async (request, reply) => {
      // After a change the form redirects here (so a reload does not post it again) with what it did.
      const key = request.query.done;
      const done = key !== undefined && Object.hasOwn(DONE, key) ? DONE[key as keyof typeof DONE] : undefined;
      const view = await portal.view(
        cookieOf(request, PORTAL_COOKIE),
        done === undefined ? null : { kind: 'saved', text: done },
      );
      if (view === undefined) return page(reply).status(401).send(renderPortalGone(undefined, 'session'));
      return page(reply).send(renderPortal(view));
    });

    /** The portal again, with why the last step was refused: its message and status. */
    const refused = async (reply: FastifyReply, secret: string | undefined, error: unknown) => {
      if (!(error instanceof DomainError)) throw error;
      const problems =
        error instanceof ValidationError ? error.errors.map((p) => `${p.path.slice(1)} ${p.message}`) : [];
      const view = await portal.view(secret, {
        kind: 'error',
        text: problems.length > 0 ? `Not done: ${problems.join('; ')}.` : `Not done: ${error.message}.`,
      });
      if (view === undefined) return page(reply).status(401).send(renderPortalGone(undefined, 'session'));
      // Too many codes asked for: when to ask again.
      if (error instanceof SignInError && error.retryAfterSeconds !== undefined)
        reply.header('retry-after', String(error.retryAfterSeconds));
      return page(reply).status(ERROR_STATUS[error.code]).send(renderPortal(view));
    };

    /** A page of the signed-in customer's; a refusal shows the portal with why. */
    const signedInPage = <T>(
      reply: FastifyReply,
      secret: string | undefined,
      read: () => Promise<T | undefined>,
      render: (view: T) => string,
      statusOf: (view: T) => number = () => 200,
    ) =>
      read().then(
        (view) =>
          view === undefined
            ? page(reply).status(401).send(renderPortalGone(undefined, 'session'))
            : page(reply).status(statusOf(view)).send(render(view)),
        (error: unknown) => refused(reply, secret, error),
      );

    app.get(
      '/portal/change/:purchaseRef',
      { schema: { ...hide, params: PurchaseParams, querystring: ChangeQuery } },
      (request, reply) => {
        const secret = cookieOf(request, PORTAL_COOKIE);
        return signedInPage(
          reply,
          secret,
          () =>
            account.changePage(secret, request.params.purchaseRef, request.query.plan, request.query.code),
          renderChangePlan,
          // A promotion code refused is shown on the page, with the refusal's status.
          (view) => (view.codeRefusal === null ? 200 : ERROR_STATUS[view.codeRefusal.code]),
        );
      },
    );
    app.get(
      '/portal/cancel/:purchaseRef',
      { schema: { ...hide, params: PurchaseParams } },
      (request, reply) => {
        const secret = cookieOf(request, PORTAL_COOKIE);
        return signedInPage(
          reply,
          secret,
          () => account.cancelPage(secret, request.params.purchaseRef),
          renderCancel,
        );
      },
    );

    /**
     * A form of the portal: `act` reads it and makes the change, answering where to go next (a
     * redirect, so a reload posts nothing) or undefined when the browser is not signed in. A
     * refusal shows the page again with what was wrong, and its status.
     */
    const form = (
      path: string,
      act: (secret: string | undefined, fields: Form, address: string) => Promise<string | undefined>,
    ) =>
      app.post(path, { schema: hide }, async (request, reply) => {
        const secret = cookieOf(request, PORTAL_COOKIE);
        const fields = (request.body ?? {}) as Form;
        try {
          singleFields(fields);
          const next = await act(secret, fields, request.ip);
          if (next === undefined) return page(reply).status(401).send(renderPortalGone(undefined, 'session'));
          return reply.header('cache-control', 'no-store').redirect(next, 303);
        } catch (error) {
          return refused(reply, secret, error);
        }
      });
    const field = (fields: Form, name: string) => (fields[name] ?? '').slice(0, 100);
    const done = (key: string | undefined) => (key === undefined ? undefined : `/portal?done=${key}`);

    form('/portal/change', (secret, fields) =>
      account.confirmChange(secret, {
        csrf: fields.csrf,
        purchaseRef: field(fields, 'purchaseRef'),
        planRef: field(fields, 'planRef'),
        prorationDate: field(fields, 'prorationDate'),
        code: field(fields, 'code'),
      }),
    );
    // The cancel page's retention offer, taken instead of cancelling.
    form('/portal/retention', async (secret, fields) =>
      done(
        await account.acceptRetention(secret, {
          csrf: fields.csrf,
          purchaseRef: field(fields, 'purchaseRef'),
        }),
      ),
    );
    form('/portal/cancel-now', async (secret, fields) =>
      done(
        await account.cancelNow(secret, {
          csrf: fields.csrf,
          purchaseRef: field(fields, 'purchaseRef'),
          prorationDate: field(fields, 'prorationDate'),
          cancellationDetails: cancellationFromForm(fields.feedback ?? '', fields.comment ?? ''),
        }),
      ),
    );
    // To the hosted checkout in setup mode, which comes back to the portal once the card is saved.
    form('/portal/cards', (secret, fields) => account.addCard(secret, { csrf: fields.csrf }));
    form('/portal/cards/default', async (secret, fields) =>
      done(await account.makeDefaultCard(secret, { csrf: fields.csrf, id: field(fields, 'id') })),
    );
    form('/portal/cards/remove', async (secret, fields) =>
      done(await account.removeCard(secret, { csrf: fields.csrf, id: field(fields, 'id') })),
    );

    form('/portal/auto-top-up', async (secret, fields) => {
      const input =
        fields.off === '1'
          ? null
          : {
              productRef: (fields.productRef ?? '').slice(0, 100),
              threshold: wholeNumber(fields, 'threshold', 1_000_000_000_000),
              packs: Math.max(1, wholeNumber(fields, 'packs', 100)),
            };
      const done = await portal.setAutoTopUp(secret, { csrf: fields.csrf, input });
      return done === undefined ? undefined : `/portal?done=${done}`;
    });

    // To the hosted checkout, which comes back to the portal once paid.
    form('/portal/buy-credits', (secret, fields) =>
      portal.buyCredits(secret, {
        csrf: fields.csrf,
        productRef: (fields.productRef ?? '').slice(0, 100),
        packs: Math.max(1, wholeNumber(fields, 'packs', 100)),
      }),
    );

    form('/portal/invoices/pay', async (secret, fields) =>
      done(await account.payInvoice(secret, { csrf: fields.csrf, id: field(fields, 'id') })),
    );

    form('/portal/alerts', async (secret, fields) => {
      const done = await account.addAlert(secret, {
        csrf: fields.csrf,
        kind: (fields.kind ?? '').slice(0, 40),
        threshold: (fields.threshold ?? '').slice(0, 40),
      });
      return done === undefined ? undefined : `/portal?done=${done}`;
    });

    form('/portal/alerts/remove', async (secret, fields) => {
      const done = await account.removeAlert(secret, {
        csrf: fields.csrf,
        id: (fields.id ?? '').slice(0, 100),
      });
      return done === undefined ? undefined : `/portal?done=${done}`;
    });

    form('/portal/cancel', async (secret, fields) => {
      const done = await portal.cancelAtPeriodEnd(secret, {
        csrf: fields.csrf,
        purchaseRef: (fields.purchaseRef ?? '').slice(0, 100),
        cancellationDetails: cancellationFromForm(fields.feedback ?? '', fields.comment ?? ''),
      });
      return done === undefined ? undefined : `/portal?done=${done}`;
    });

    // The customer's own details; a new email address once the code mailed to it comes back.
    form('/portal/details', async (secret, fields) =>
      done(
        await details.save(secret, {
          csrf: fields.csrf,
          name: (fields.name ?? '').slice(0, 1000),
          telephone: (fields.telephone ?? '').slice(0, 100),
        }),
      ),
    );
    form('/portal/address', async (secret, fields) =>
      done(
        await details.saveAddress(secret, {
          csrf: fields.csrf,
          line1: (fields.line1 ?? '').slice(0, 1000),
          line2: (fields.line2 ?? '').slice(0, 1000),
          city: (fields.city ?? '').slice(0, 1000),
          state: (fields.state ?? '').slice(0, 1000),
          postalCode: (fields.postalCode ?? '').slice(0, 1000),
          country: (fields.country ?? '').slice(0, 10),
        }),
      ),
    );
    form('/portal/tax-ids', async (secret, fields) =>
      done(
        await details.addTaxId(secret, {
          csrf: fields.csrf,
          type: (fields.type ?? '').slice(0, 20),
          value: (fields.value ?? '').slice(0, 1000),
        }),
      ),
    );
    form('/portal/tax-ids/remove', async (secret, fields) =>
      done(
        await details.removeTaxId(secret, {
          csrf: fields.csrf,
          type: (fields.type ?? '').slice(0, 20),
          value: (fields.value ?? '').slice(0, 100),
        }),
      ),
    );
    form('/portal/email', async (secret, fields, address) => {
      const codeId = await details.askEmail(
        secret,
        { csrf: fields.csrf, email: (fields.email ?? '').slice(0, 1000) },
        address,
      );
      return codeId === undefined ? undefined : `/portal/email?code=${encodeURIComponent(codeId)}`;
    });
    app.get('/portal/email', { schema: { ...hide, querystring: CodeQuery } }, (request, reply) => {
      const secret = cookieOf(request, PORTAL_COOKIE);
      return signedInPage(
        reply,
        secret,
        async () => {
          const view = await details.emailPage(secret, request.query.code);
          if (view !== undefined && 'unknown' in view)
            throw new NotFoundError('verification_not_found', 'This code is not known; ask for a new one');
          return view;
        },
        renderEmailCode,
      );
    });
    // A wrong code shows its page again with why; the portal once the address is changed.
    app.post('/portal/email/confirm', { schema: hide }, async (request, reply) => {
      const secret = cookieOf(request, PORTAL_COOKIE);
      const fields = (request.body ?? {}) as Form;
      try {
        singleFields(fields);
        const changed = await details.confirmEmail(
          secret,
          { csrf: fields.csrf, codeId: fields.codeId, code: (fields.code ?? '').slice(0, 20) },
          request.ip,
        );
        if (changed === undefined)
          return page(reply).status(401).send(renderPortalGone(undefined, 'session'));
        return reply.header('cache-control', 'no-store').redirect(`/portal?done=${changed}`, 303);
      } catch (error) {
        if (!(error instanceof SignInError && error.code === 'invalid_verification_code'))
          return refused(reply, secret, error);
        const view = await details.emailPage(secret, (fields.codeId ?? '').slice(0, 100));
        if (view === undefined || 'unknown' in view) return refused(reply, secret, error);
        return page(reply)
          .status(ERROR_STATUS[error.code])
          .send(renderEmailCode({ ...view, error: error.message }));
      }
    });

    app.post('/portal/sign-out', { schema: hide }, async (request, reply) => {
      const back = await portal.signOut(cookieOf(request, PORTAL_COOKIE));
      reply.header('set-cookie', portalCookie('', secureCookies, 0));
      if (back !== null) return reply.redirect(back, 303);
      return page(reply).send(renderPortalGone(undefined, 'session'));
    });
  };
}
