import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { mayManage, useEnvironment, useSession } from '../session';
import { Checkbox, dateTime, FormProblem, Loaded, Page, Table } from '../ui';
import { SettingsNav } from './settings';

type Settings = Awaited<ReturnType<typeof loadSettings>>;
const loadSettings = () => unwrap(api.GET('/v1/sdk/customer-emails'));

/** The kinds a provider turns on, in the words the page shows them with. */
const KINDS: readonly { key: keyof Settings; label: string; hint: string }[] = [
  {
    key: 'paymentFailed',
    label: 'Failed payments',
    hint: 'A renewal or retry was refused (the amount, the next try, where to pay now), or a trial ended unpaid',
  },
  { key: 'trialEnding', label: 'Trials ending', hint: 'Three days before a trial ends' },
  { key: 'upcomingRenewal', label: 'Upcoming renewals', hint: 'Seven days before a plan renews' },
  { key: 'receipts', label: 'Receipts', hint: 'Each payment taken, with its invoice' },
  { key: 'refunds', label: 'Refunds', hint: 'Each refund made, with the payment it came from' },
  {
    key: 'autoTopUpFailed',
    label: 'Failed auto top-ups',
    hint: 'An automatic credit top-up was refused: when it is tried again, or that it stopped',
  },
  {
    key: 'expiringCards',
    label: 'Expiring cards',
    hint: 'The default card expires this month and will be charged again: add a new one',
  },
  {
    key: 'cancellations',
    label: 'Cancellations',
    hint: 'A plan cancelled to end with its period (the day it ends, how to keep it), and when one ended',
  },
];

const KIND_WORDS: Record<string, string> = {
  payment_failed: 'Failed payment',
  trial_ending: 'Trial ending',
  upcoming_renewal: 'Upcoming renewal',
  receipt: 'Receipt',
  refund: 'Refund',
  auto_topup_failed: 'Failed auto top-up',
  card_expiring: 'Expiring card',
  cancellation: 'Cancellation',
};

/**
 * Customer emails: which billing mails go to this environment's customers (all off until turned
 * on), and the mails sent or waiting, newest first. Two calls.
 */
export function CustomerEmails() {
  const session = useSession();
  const [environment] = useEnvironment();
  const settings = useQuery({ queryKey: ['customer-emails'], queryFn: loadSettings });
  const manager = session.data !== undefined && mayManage(session.data.role);
  return (
    <Page title="Customer emails">
      <SettingsNav />
      <Loaded query={settings} what="the customer email settings">
        {(s) => <Choices settings={s} canChange={manager} environment={environment} />}
      </Loaded>
      <Sent />
    </Page>
  );
}

function Choices(props: { settings: Settings; canChange: boolean; environment: string }) {
  const client = useQueryClient();
  const [form, setForm] = useState(props.settings);
  const save = useMutation({
    mutationFn: () => unwrap(api.PATCH('/v1/sdk/customer-emails', { body: form })),
    onSuccess: (next) => client.setQueryData(['customer-emails'], next),
  });
  return (
    <form
      className="card"
      aria-labelledby="emails-title"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="emails-title">Mails to your customers</h2>
      <p className="muted">
        Sent from this service to the customer’s email address, with your business name and support email, for
        the {props.environment} environment
        {props.environment === 'sandbox' ? ' (marked as sandbox mail)' : ''}. Each also goes out as its event.
      </p>
      <fieldset disabled={!props.canChange} className="choices">
        <legend className="visually-hidden">Mails to send</legend>
        {KINDS.map((kind) => (
          <Checkbox
            key={kind.key}
            label={kind.label}
            name={kind.key}
            checked={form[kind.key]}
            onChange={(checked) => setForm((f) => ({ ...f, [kind.key]: checked }))}
            hint={kind.hint}
          />
        ))}
      </fieldset>
      <FormProblem error={save.error} fields={KINDS.map((k) => k.key)} />
      {save.isSuccess && <p role="status">Saved: mails of the kinds chosen go out from now on.</p>}
      {props.canChange && (
        <button type="submit" className="primary" disabled={save.isPending}>
          Save customer emails
        </button>
      )}
    </form>
  );
}

function Sent() {
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const mails = useQuery({
    queryKey: ['customer-mails', cursor],
    queryFn: () =>
      unwrap(
        api.GET('/v1/sdk/customer-emails/messages', {
          params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } },
        }),
      ),
  });
  return (
    <section className="card" aria-labelledby="sent-title">
      <h2 id="sent-title">Mails</h2>
      <Loaded
        query={mails}
        what="the mails"
        isEmpty={(m) => m.data.length === 0}
        empty={<p>None yet: mails of the kinds chosen appear here.</p>}
      >
        {(m) => (
          <>
            <Table
              caption="Mails to customers, newest first"
              rows={m.data}
              rowKey={(mail) => mail.id}
              columns={[
                {
                  header: 'When (UTC)',
                  cell: (mail) => dateTime(mail.sentAt ?? mail.createdAt),
                  nowrap: true,
                },
                { header: 'Customer', cell: (mail) => mail.to ?? <code>{mail.customerRef}</code> },
                { header: 'Kind', cell: (mail) => KIND_WORDS[mail.kind] ?? mail.kind },
                {
                  header: 'Status',
                  cell: (mail) =>
                    mail.status === 'logged' ? 'logged, not sent (no mail relay)' : mail.status,
                },
                { header: 'Subject or problem', cell: (mail) => mail.subject ?? mail.lastError ?? '—' },
              ]}
            />
            {m.nextCursor && (
              <button type="button" onClick={() => setCursor(m.nextCursor ?? undefined)}>
                Older mails
              </button>
            )}
          </>
        )}
      </Loaded>
    </section>
  );
}
