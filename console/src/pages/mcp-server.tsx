import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from '@tanstack/react-router';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { mayIntegrate, useSession } from '../session';
import { dateTime, Failed, Field, FormProblem, Loaded, Loading, Page, Select } from '../ui';
import { connectionSnippets } from './mcp-servers';

type Server = Awaited<ReturnType<typeof loadServer>>;
type Tool = Server['tools'][number];
type Access = 'plans' | 'free';

const loadServer = (id: string) => unwrap(api.GET('/v1/ui/mcp-servers/{id}', { params: { path: { id } } }));

/** Who may call a tool, in words: everyone for free, every plan, or the plans named. */
function accessOf(tool: Tool, planNames: Map<string, string>): string {
  if (tool.noPlan) return 'everyone, free';
  if (tool.planIds.length === 0) return 'every plan';
  return tool.planIds.map((id) => planNames.get(id) ?? id).join(', ');
}

/**
 * One MCP server: the origin's health as a client would find it, its settings, its tools and
 * which plans may call each, and how clients connect. Three API calls: the server, the origin's
 * health, and the plans of its product.
 */
export function McpServerPage() {
  const { serverId } = useParams({ strict: false }) as { serverId: string };
  const session = useSession();
  const client = useQueryClient();
  const server = useQuery({ queryKey: ['mcp-server', serverId], queryFn: () => loadServer(serverId) });
  const health = useQuery({
    queryKey: ['mcp-server-health', serverId],
    queryFn: () => unwrap(api.GET('/v1/ui/mcp-servers/{id}/health', { params: { path: { id: serverId } } })),
    staleTime: 0,
  });
  const productId = server.data?.productId ?? null;
  const plans = useQuery({
    enabled: productId !== null,
    queryKey: ['plans', productId],
    queryFn: () =>
      unwrap(
        api.GET('/v1/ui/products/{id}/plans', {
          params: { path: { id: productId as string }, query: { limit: 100 } },
        }),
      ),
  });
  const canChange = session.data !== undefined && mayIntegrate(session.data.role);

  if (server.isPending) return <Loading what="the MCP server" />;
  if (server.error) return <Failed error={server.error} retry={() => void server.refetch()} />;
  const s = server.data;
  const planList = (plans.data?.data ?? []).filter((p) => p.status !== 'archived');
  const planNames = new Map(planList.map((p) => [p.id, p.name]));
  const saved = (next: Server) => client.setQueryData(['mcp-server', serverId], next);

  return (
    <Page title={s.name}>
      <p className="muted">
        <Link to="/mcp-servers">MCP servers</Link> · <code>{s.id}</code> · {s.status}
      </p>
      <section className="card" aria-labelledby="health-title">
        <h2 id="health-title">Origin health</h2>
        <Loaded query={health} what="the origin's health">
          {(h) => (
            <>
              <p>
                <span className={h.healthy ? 'health up' : 'health down'}>
                  {h.healthy ? 'Healthy' : 'Unhealthy'}
                </span>{' '}
                {h.healthy
                  ? `answered initialize and tools/list in ${h.latencyMs} ms: ${h.toolCount} tools, protocol ${h.protocolVersion}${h.serverName ? `, ${h.serverName} ${h.serverVersion ?? ''}` : ''}`
                  : h.problem}
              </p>
              <p className="muted">
                Checked {dateTime(h.checkedAt)} at <code>{s.url}</code>
              </p>
            </>
          )}
        </Loaded>
        <button type="button" onClick={() => void health.refetch()} disabled={health.isFetching}>
          Check again
        </button>
      </section>
      {canChange && <ServerSettings server={s} plans={planList} onSaved={saved} />}
      <ToolAccess
        server={s}
        plans={planList}
        planNames={planNames}
        plansLoading={productId !== null && plans.isPending}
        canChange={canChange}
        onSaved={saved}
      />
      <section className="card" aria-labelledby="connect-title">
        <h2 id="connect-title">Connect a client</h2>
        <p>
          Clients connect to <code data-testid="proxy-url">{s.mcpProxyUrl}</code>
        </p>
        {connectionSnippets(s.name, s.mcpProxyUrl).map((snippet) => (
          <div key={snippet.client}>
            <h3>{snippet.client}</h3>
            <pre>
              <code>{snippet.text}</code>
            </pre>
          </div>
        ))}
      </section>
    </Page>
  );
}

/**
 * The origin URL, whether the proxy serves the server, the product it sells and the free plan
 * callers without a purchase fall to. The product list is read only when asked for (a change of
 * product is rare; the page keeps to three calls).
 */
function ServerSettings(props: {
  server: Server;
  plans: readonly { id: string; name: string; requiresPayment: boolean }[];
  onSaved: (next: Server) => void;
}) {
  const [url, setUrl] = useState(props.server.url);
  const [status, setStatus] = useState(props.server.status);
  const [productId, setProductId] = useState(props.server.productId ?? '');
  const [defaultPlanId, setDefaultPlanId] = useState(props.server.defaultPlanId ?? '');
  const [choosingProduct, setChoosingProduct] = useState(false);
  const products = useQuery({
    enabled: choosingProduct,
    queryKey: ['products'],
    queryFn: () => unwrap(api.GET('/v1/ui/products', { params: { query: { limit: 100 } } })),
  });
  const productChanged = productId !== (props.server.productId ?? '');
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/v1/ui/mcp-servers/{id}', {
          params: { path: { id: props.server.id } },
          body: {
            url,
            status,
            ...(productChanged ? { productId: productId || null, defaultPlanId: null } : {}),
            ...(!productChanged && defaultPlanId !== (props.server.defaultPlanId ?? '')
              ? { defaultPlanId: defaultPlanId || null }
              : {}),
          },
        }),
      ),
    onSuccess: (next) => {
      setChoosingProduct(false);
      setDefaultPlanId(next.defaultPlanId ?? '');
      props.onSaved(next);
    },
  });
  const freePlans = props.plans.filter((p) => !p.requiresPayment);
  return (
    <form
      className="card"
      aria-labelledby="settings-title"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="settings-title">Settings</h2>
      <Field label="Origin URL" name="url" type="url" value={url} onChange={setUrl} error={save.error} />
      <Select
        label="Status"
        name="status"
        value={status}
        onChange={setStatus}
        options={[
          { value: 'active', label: 'Active: the proxy serves it' },
          { value: 'inactive', label: 'Inactive: the proxy refuses calls' },
          { value: 'suspended', label: 'Suspended' },
        ]}
      />
      {choosingProduct ? (
        <Select
          label="Product"
          name="productId"
          value={productId}
          onChange={setProductId}
          options={[
            { value: '', label: products.isPending ? 'Loading products…' : 'None (not sold)' },
            ...(products.data?.data ?? []).map((p) => ({ value: p.id, label: p.name })),
          ]}
        />
      ) : (
        <p>
          {props.server.productId === null ? (
            'Not sold: no product.'
          ) : (
            <>
              Sells product <code>{props.server.productId}</code>.
            </>
          )}{' '}
          <button type="button" onClick={() => setChoosingProduct(true)}>
            Change the product
          </button>
        </p>
      )}
      {!productChanged && props.server.productId !== null && (
        <Select
          label="Default plan (callers without a purchase)"
          name="defaultPlanId"
          value={defaultPlanId}
          onChange={setDefaultPlanId}
          options={[
            { value: '', label: 'None: callers must buy a plan' },
            ...freePlans.map((p) => ({ value: p.id, label: p.name })),
          ]}
        />
      )}
      <FormProblem error={save.error} fields={['url', 'status', 'productId', 'defaultPlanId']} />
      {save.isSuccess && <p role="status">Saved.</p>}
      <button type="submit" className="primary" disabled={save.isPending}>
        Save settings
      </button>
    </form>
  );
}

/** The tools, and for each: free for everyone, or the plans that may call it (none ticked: every plan). */
function ToolAccess(props: {
  server: Server;
  plans: readonly { id: string; name: string }[];
  planNames: Map<string, string>;
  plansLoading: boolean;
  canChange: boolean;
  onSaved: (next: Server) => void;
}) {
  const { server } = props;
  const [draft, setDraft] = useState<Record<string, { access: Access; planIds: string[] }>>({});
  const stateOf = (tool: Tool) =>
    draft[tool.name] ?? { access: tool.noPlan ? 'free' : 'plans', planIds: tool.planIds };
  const change = (tool: Tool, next: { access: Access; planIds: string[] }) =>
    setDraft((current) => ({ ...current, [tool.name]: next }));
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/v1/ui/mcp-servers/{id}', {
          params: { path: { id: server.id } },
          body: {
            tools: server.tools.map((tool) => {
              const state = stateOf(tool);
              return {
                name: tool.name,
                description: tool.description,
                isVirtual: tool.isVirtual,
                noPlan: state.access === 'free',
                planIds: state.access === 'free' ? [] : state.planIds,
              };
            }),
          },
        }),
      ),
    onSuccess: (next) => {
      setDraft({});
      props.onSaved(next);
    },
  });
  const importTools = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/ui/mcp-servers/{id}/tools/import', { params: { path: { id: server.id } } })),
    onSuccess: (next) => {
      setDraft({});
      props.onSaved(next);
    },
  });
  const editable = props.canChange && server.productId !== null;
  return (
    <section className="card" aria-labelledby="tools-title">
      <h2 id="tools-title">Tools and who may call them</h2>
      {server.productId === null && (
        <p className="muted">Link the server to a product to sell its tools by plan.</p>
      )}
      {server.tools.length === 0 ? (
        <p className="muted">No tools yet: import them from the origin.</p>
      ) : props.plansLoading ? (
        <Loading what="plans" />
      ) : (
        <table>
          <caption className="visually-hidden">Tools of {server.name}</caption>
          <thead>
            <tr>
              <th scope="col">Tool</th>
              <th scope="col">Description</th>
              <th scope="col">Who may call it</th>
            </tr>
          </thead>
          <tbody>
            {server.tools.map((tool) => {
              const state = stateOf(tool);
              return (
                <tr key={tool.name}>
                  <td>
                    <code>{tool.name}</code>
                  </td>
                  <td>{tool.description}</td>
                  <td>
                    {!editable ? (
                      accessOf(tool, props.planNames)
                    ) : (
                      <fieldset className="checks">
                        <legend className="visually-hidden">Who may call {tool.name}</legend>
                        <label>
                          <input
                            type="checkbox"
                            checked={state.access === 'free'}
                            onChange={(e) =>
                              change(tool, { ...state, access: e.target.checked ? 'free' : 'plans' })
                            }
                          />
                          Free for everyone
                        </label>
                        {props.plans.map((plan) => (
                          <label key={plan.id}>
                            <input
                              type="checkbox"
                              disabled={state.access === 'free'}
                              checked={state.access !== 'free' && state.planIds.includes(plan.id)}
                              onChange={(e) =>
                                change(tool, {
                                  access: 'plans',
                                  planIds: e.target.checked
                                    ? [...state.planIds, plan.id]
                                    : state.planIds.filter((id) => id !== plan.id),
                                })
                              }
                            />
                            {plan.name}
                          </label>
                        ))}
                        {state.access !== 'free' && state.planIds.length === 0 && (
                          <small className="muted">No plan ticked: every plan may call it.</small>
                        )}
                      </fieldset>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <FormProblem error={save.error ?? importTools.error} />
      {props.canChange && (
        <div className="row">
          {editable && server.tools.length > 0 && (
            <button
              type="button"
              className="primary"
              onClick={() => save.mutate()}
              disabled={save.isPending || Object.keys(draft).length === 0}
            >
              Save who may call each tool
            </button>
          )}
          <button type="button" onClick={() => importTools.mutate()} disabled={importTools.isPending}>
            Import tools from the origin
          </button>
        </div>
      )}
      {save.isSuccess && <p role="status">Tool access saved; the proxy applies it within seconds.</p>}
    </section>
  );
}
