import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { mayManage, type Role, useSession } from '../session';
import { dateTime, Empty, Failed, Field, FormProblem, Loaded, Loading, Page, Select, Table } from '../ui';
import { SettingsNav } from './settings';

const ROLES: readonly { value: Role; label: string }[] = [
  { value: 'viewer', label: 'Viewer: reads everything' },
  { value: 'developer', label: 'Developer: API keys, webhooks, MCP servers' },
  { value: 'admin', label: 'Admin: everything but owners' },
  { value: 'owner', label: 'Owner' },
];

/** The team: members and their roles, open invitations, and a form to invite someone. */
export function Team() {
  const session = useSession();
  const client = useQueryClient();
  const team = useQuery({ queryKey: ['team'], queryFn: () => unwrap(api.GET('/v1/ui/team')) });
  const refresh = () => void client.invalidateQueries({ queryKey: ['team'] });
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('developer');
  const invite = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/ui/team/invitations', { body: { email, role } })),
    onSuccess: () => {
      setEmail('');
      refresh();
    },
  });
  const change = useMutation({
    mutationFn: (input: { userId: string; role: Role }) =>
      unwrap(
        api.PATCH('/v1/ui/team/members/{userId}', {
          params: { path: { userId: input.userId } },
          body: { role: input.role },
        }),
      ),
    onSettled: refresh,
  });
  const remove = useMutation({
    mutationFn: (userId: string) =>
      unwrap(api.DELETE('/v1/ui/team/members/{userId}', { params: { path: { userId } } })),
    onSettled: refresh,
  });
  const revoke = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.DELETE('/v1/ui/team/invitations/{id}', { params: { path: { id } } })),
    onSettled: refresh,
  });
  if (team.isPending || session.data === undefined) return <Loading what="the team" />;
  if (team.error) return <Failed error={team.error} retry={() => void team.refetch()} />;
  const manager = mayManage(session.data.role);
  const owner = session.data.role === 'owner';
  return (
    <Page title="Team">
      <SettingsNav />
      <table>
        <caption className="visually-hidden">Members</caption>
        <thead>
          <tr>
            <th scope="col">Email</th>
            <th scope="col">Role</th>
            <th scope="col">Joined</th>
            {manager && (
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {team.data.members.map((member) => {
            const locked = !manager || (member.role === 'owner' && !owner);
            return (
              <tr key={member.userId}>
                <td>{member.email}</td>
                <td>
                  {locked ? (
                    member.role
                  ) : (
                    <select
                      aria-label={`Role of ${member.email}`}
                      value={member.role}
                      onChange={(e) => change.mutate({ userId: member.userId, role: e.target.value as Role })}
                    >
                      {ROLES.filter((r) => owner || r.value !== 'owner').map((r) => (
                        <option key={r.value} value={r.value}>
                          {r.value}
                        </option>
                      ))}
                    </select>
                  )}
                </td>
                <td>{dateTime(member.joinedAt)}</td>
                {manager && (
                  <td>
                    {!locked && member.userId !== session.data.user.id && (
                      <button type="button" onClick={() => remove.mutate(member.userId)}>
                        Remove {member.email}
                      </button>
                    )}
                  </td>
                )}
              </tr>
            );
          })}
        </tbody>
      </table>
      <FormProblem error={change.error ?? remove.error ?? revoke.error} />
      <h2>Open invitations</h2>
      {team.data.invitations.length === 0 ? (
        <Empty>
          <p>No open invitations.</p>
        </Empty>
      ) : (
        <table>
          <caption className="visually-hidden">Open invitations</caption>
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Expires</th>
              {manager && (
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {team.data.invitations.map((invitation) => (
              <tr key={invitation.id}>
                <td>{invitation.email}</td>
                <td>{invitation.role}</td>
                <td>{dateTime(invitation.expiresAt)}</td>
                {manager && (
                  <td>
                    <button type="button" onClick={() => revoke.mutate(invitation.id)}>
                      Revoke invitation to {invitation.email}
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {manager && (
        <form
          className="card"
          aria-labelledby="invite"
          onSubmit={(event) => {
            event.preventDefault();
            invite.mutate();
          }}
          noValidate
        >
          <h2 id="invite">Invite someone</h2>
          <Field
            label="Email"
            name="email"
            type="email"
            value={email}
            onChange={setEmail}
            error={invite.error}
            required
          />
          <Select<Role>
            label="Role"
            name="role"
            value={role}
            onChange={setRole}
            options={ROLES.filter((r) => owner || r.value !== 'owner')}
          />
          <FormProblem error={invite.error} fields={['email', 'role']} />
          <button type="submit" className="primary" disabled={invite.isPending}>
            Send invitation
          </button>
        </form>
      )}
    </Page>
  );
}

/** The audit log: who changed what, when and from where (owners and admins). */
export function Audit() {
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const events = useQuery({
    queryKey: ['audit', cursor],
    queryFn: () =>
      unwrap(
        api.GET('/v1/ui/audit-events', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } }),
      ),
  });
  return (
    <Page title="Audit log">
      <SettingsNav />
      <Loaded
        query={events}
        what="the audit log"
        isEmpty={(e) => e.data.length === 0}
        empty={<p>Nothing yet: changes made in the console appear here.</p>}
      >
        {(e) => (
          <>
            <Table
              caption="Audit events, newest first"
              rows={e.data}
              rowKey={(event) => event.id}
              columns={[
                { header: 'When (UTC)', cell: (event) => dateTime(event.createdAt) },
                { header: 'Who', cell: (event) => `${event.actor.email} (${event.actor.role})` },
                { header: 'What', cell: (event) => <code>{event.operation}</code> },
                { header: 'Where', cell: (event) => event.environment ?? '—' },
                { header: 'Result', cell: (event) => event.status },
                { header: 'From', cell: (event) => event.address ?? '—' },
              ]}
            />
            {e.nextCursor && (
              <button type="button" onClick={() => setCursor(e.nextCursor ?? undefined)}>
                Older events
              </button>
            )}
          </>
        )}
      </Loaded>
    </Page>
  );
}
