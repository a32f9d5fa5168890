import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, currentEnvironment, type Environment, setCsrfToken, setEnvironment, unwrap } from './api';

/** The signed-in member's session: who, at which provider, in which role. */
export function useSession() {
  return useQuery({
    queryKey: ['session'],
    queryFn: async () => {
      const session = await unwrap(api.GET('/v1/console/session'));
      setCsrfToken(session.csrfToken);
      return session;
    },
    retry: false,
    staleTime: 60_000,
  });
}

export type Session = NonNullable<ReturnType<typeof useSession>['data']>;
export type Role = Session['role'];

/** Whether a role may change the catalog, customers and money (the API decides; the UI follows). */
export const mayManage = (role: Role) => role === 'owner' || role === 'admin';
/** Whether a role may change the integration: webhooks, MCP servers, meters. */
export const mayIntegrate = (role: Role) => mayManage(role) || role === 'developer';

/** The sandbox/live switch: switching forgets every answer of the other environment. */
export function useEnvironment(): [Environment, (next: Environment) => void] {
  const client = useQueryClient();
  const [value, setValue] = useState(currentEnvironment());
  return [
    value,
    (next) => {
      setEnvironment(next);
      setValue(next);
      client.removeQueries({ predicate: (query) => query.queryKey[0] !== 'session' });
    },
  ];
}
