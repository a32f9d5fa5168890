import { brandColours } from '@mcp-meter/contracts/brand';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiProblem, api, unwrap } from '../api';
import { mayManage, useEnvironment, useSession } from '../session';
import { dateTime, Field, FormProblem, Loaded, Page, SubNav } from '../ui';
import { InvoiceIssuer } from './billing-details';

export function SettingsNav() {
  return (
    <SubNav
      label="Settings"
      links={[
        { to: '/settings', label: 'Business and branding' },
        { to: '/settings/emails', label: 'Customer emails' },
        { to: '/settings/team', label: 'Team' },
        { to: '/settings/audit', label: 'Audit log' },
      ]}
    />
  );
}

type Merchant = Awaited<ReturnType<typeof loadMerchant>>;
const loadMerchant = () => unwrap(api.GET('/v1/sdk/merchant'));

/** The merchant fields this form edits; an emptied optional field is cleared (null). */
const BRAND_FIELDS = [
  'displayName',
  'logoUrl',
  'brandColor',
  'supportEmail',
  'termsUrl',
  'privacyUrl',
] as const;
type BrandField = (typeof BRAND_FIELDS)[number];

/**
 * Settings: how the hosted pages (checkout, sign-in, invoices) present the business, the credit
 * warning threshold, and in live the Stripe account that takes the payments. At most three calls.
 */
export function Settings() {
  const session = useSession();
  const [environment] = useEnvironment();
  const merchant = useQuery({ queryKey: ['merchant'], queryFn: loadMerchant });
  const settings = useQuery({ queryKey: ['settings'], queryFn: () => unwrap(api.GET('/v1/ui/settings')) });
  const manager = session.data !== undefined && mayManage(session.data.role);
  return (
    <Page title="Settings">
      <SettingsNav />
      <Loaded query={merchant} what="the business profile">
        {(m) => (
          <>
            <Branding merchant={m} canChange={manager} />
            <InvoiceIssuer merchant={m} canChange={manager} />
          </>
        )}
      </Loaded>
      <Loaded query={settings} what="settings">
        {(s) => <Threshold value={s.lowBalanceThreshold} canChange={manager} />}
      </Loaded>
      {environment === 'live' ? (
        <StripeConnection canChange={manager} providerId={session.data?.provider.id ?? ''} />
      ) : (
        <section className="card" aria-labelledby="stripe-title">
          <h2 id="stripe-title">Payments</h2>
          <p>
            Sandbox payments use the built-in test processor (card 4242 4242 4242 4242). Switch to Live to
            connect the Stripe account that takes real payments.
          </p>
        </section>
      )}
    </Page>
  );
}

function Branding(props: { merchant: Merchant; canChange: boolean }) {
  const client = useQueryClient();
  const initial = Object.fromEntries(
    BRAND_FIELDS.map((f) => [f, (props.merchant as Record<string, unknown>)[f] ?? '']),
  ) as Record<BrandField, string>;
  const [form, setForm] = useState(initial);
  const set = (field: BrandField) => (value: string) => setForm((f) => ({ ...f, [field]: value }));
  const save = useMutation({
    mutationFn: () => {
      const body: Record<string, string | null> = {};
      for (const field of BRAND_FIELDS) {
        const value = form[field].trim();
        if (value === initial[field]) continue;
        if (value === '' && field === 'displayName')
          throw new ApiProblem(400, 'validation_failed', 'A name is needed', [
            { path: '/displayName', message: 'is needed: customers see it on every page' },
          ]);
        body[field] = value === '' ? null : value;
      }
      if (Object.keys(body).length === 0) return Promise.resolve(props.merchant);
      return unwrap(api.PATCH('/v1/sdk/merchant', { body }));
    },
    onSuccess: (next) => client.setQueryData(['merchant'], next),
  });
  const colour = /^#[0-9a-fA-F]{6}$/.test(form.brandColor) ? form.brandColor.toLowerCase() : null;
  const preview = brandColours(colour);
  return (
    <form
      className="card"
      aria-labelledby="branding-title"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="branding-title">Business and branding</h2>
      <p className="muted">What customers see on the checkout, sign-in and invoice pages.</p>
      <fieldset disabled={!props.canChange} className="views">
        <legend className="visually-hidden">Business profile</legend>
        <Field
          label="Business name"
          name="displayName"
          value={form.displayName}
          onChange={set('displayName')}
          error={save.error}
        />
        <Field
          label="Logo URL"
          name="logoUrl"
          type="url"
          value={form.logoUrl}
          onChange={set('logoUrl')}
          error={save.error}
          hint="An https image, shown at most 40 px high"
        />
        <Field
          label="Brand colour"
          name="brandColor"
          value={form.brandColor}
          onChange={set('brandColor')}
          error={save.error}
          hint="#rrggbb; buttons and links of the hosted pages"
        />
        <p>
          <span
            className="swatch"
            data-testid="brand-preview"
            style={{ background: preview.brand, color: preview.onBrand }}
          >
            Pay
          </span>{' '}
          <span style={{ color: preview.brandText }}>Terms · Privacy</span>
        </p>
        <Field
          label="Support email"
          name="supportEmail"
          type="email"
          value={form.supportEmail}
          onChange={set('supportEmail')}
          error={save.error}
        />
        <Field
          label="Terms URL"
          name="termsUrl"
          type="url"
          value={form.termsUrl}
          onChange={set('termsUrl')}
          error={save.error}
        />
        <Field
          label="Privacy URL"
          name="privacyUrl"
          type="url"
          value={form.privacyUrl}
          onChange={set('privacyUrl')}
          error={save.error}
        />
      </fieldset>
      <FormProblem error={save.error} fields={BRAND_FIELDS} />
      {save.isSuccess && <p role="status">Saved: the hosted pages show it now.</p>}
      {props.canChange && (
        <button type="submit" className="primary" disabled={save.isPending}>
          Save business profile
        </button>
      )}
    </form>
  );
}

function Threshold(props: { value: number; canChange: boolean }) {
  const client = useQueryClient();
  const [text, setText] = useState(String(props.value));
  const save = useMutation({
    mutationFn: () => {
      if (!/^\d{1,13}$/.test(text.trim()))
        throw new ApiProblem(400, 'validation_failed', 'A whole number of credits', [
          { path: '/lowBalanceThreshold', message: 'must be a whole number of credits, 0 or more' },
        ]);
      return unwrap(api.PATCH('/v1/ui/settings', { body: { lowBalanceThreshold: Number(text.trim()) } }));
    },
    onSuccess: (next) => client.setQueryData(['settings'], next),
  });
  return (
    <form
      className="card"
      aria-labelledby="threshold-title"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="threshold-title">Credit warnings</h2>
      <Field
        label="Low balance threshold (credits)"
        name="lowBalanceThreshold"
        inputMode="numeric"
        value={text}
        onChange={setText}
        error={save.error}
        hint="customer.credit.low_balance fires when a balance drops below it"
      />
      <FormProblem error={save.error} fields={['lowBalanceThreshold']} />
      {save.isSuccess && <p role="status">Saved.</p>}
      {props.canChange && (
        <button type="submit" className="primary" disabled={save.isPending}>
          Save threshold
        </button>
      )}
    </form>
  );
}

/** Live payments: the provider's Stripe account (keys write-only, shown again as the last 4). */
function StripeConnection(props: { canChange: boolean; providerId: string }) {
  const client = useQueryClient();
  const connection = useQuery({
    queryKey: ['stripe'],
    queryFn: () => unwrap(api.GET('/v1/ui/processors/stripe')),
  });
  const [secretKey, setSecretKey] = useState('');
  const [webhookSigningSecret, setSigningSecret] = useState('');
  const connect = useMutation({
    mutationFn: () =>
      unwrap(api.PUT('/v1/ui/processors/stripe', { body: { secretKey, webhookSigningSecret } })),
    onSuccess: (next) => {
      setSecretKey('');
      setSigningSecret('');
      client.setQueryData(['stripe'], next);
    },
  });
  const disconnect = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/ui/processors/stripe')),
    onSuccess: (next) => client.setQueryData(['stripe'], next),
  });
  const webhookUrl = `${window.location.origin}/v1/processors/stripe/webhooks/${props.providerId}`;
  return (
    <section className="card" aria-labelledby="stripe-title">
      <h2 id="stripe-title">Stripe</h2>
      <Loaded query={connection} what="the Stripe connection">
        {(c) =>
          c.connected ? (
            <p>
              Connected to <code>{c.account}</code> ({c.mode} mode), key ending <code>{c.last4}</code>, since{' '}
              {dateTime(c.connectedAt)}.
            </p>
          ) : (
            <p>Not connected: live payments are refused until a Stripe account is connected.</p>
          )
        }
      </Loaded>
      <p className="muted">
        Point a Stripe webhook endpoint at <code>{webhookUrl}</code> and give its signing secret here.
      </p>
      {props.canChange && (
        <form
          aria-label="Connect Stripe"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            connect.mutate();
          }}
        >
          <Field
            label="Stripe secret key"
            name="secretKey"
            type="password"
            autoComplete="off"
            value={secretKey}
            onChange={setSecretKey}
            error={connect.error}
          />
          <Field
            label="Webhook signing secret"
            name="webhookSigningSecret"
            type="password"
            autoComplete="off"
            value={webhookSigningSecret}
            onChange={setSigningSecret}
            error={connect.error}
          />
          <FormProblem
            error={connect.error ?? disconnect.error}
            fields={['secretKey', 'webhookSigningSecret']}
          />
          <div className="row">
            <button type="submit" className="primary" disabled={connect.isPending}>
              Connect Stripe
            </button>
            {connection.data?.connected && (
              <button type="button" onClick={() => disconnect.mutate()} disabled={disconnect.isPending}>
                Disconnect Stripe
              </button>
            )}
          </div>
        </form>
      )}
    </section>
  );
}
