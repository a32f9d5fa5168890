import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from '@tanstack/react-router';
import { useState } from 'react';
import { api, decimalsOf, minorName, money, unwrap } from '../api';
import { mayManage, useSession } from '../session';
import { Checkbox, Empty, Failed, Field, FormProblem, Loading, Page } from '../ui';
import { PlanForm } from './plan-form';
import { RetentionOffer } from './retention-offer';

/** Products: the list, and a form to add one (owners and admins). */
export function Catalog() {
  const session = useSession();
  const client = useQueryClient();
  const products = useQuery({
    queryKey: ['products'],
    queryFn: () => unwrap(api.GET('/v1/ui/products', { params: { query: { limit: 100 } } })),
  });
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/ui/products', { body: { name, ...(description ? { description } : {}) } })),
    onSuccess: () => {
      setName('');
      setDescription('');
      void client.invalidateQueries({ queryKey: ['products'] });
    },
  });
  const canChange = session.data !== undefined && mayManage(session.data.role);
  return (
    <Page title="Catalog">
      {products.isPending ? (
        <Loading what="products" />
      ) : products.error ? (
        <Failed error={products.error} retry={() => void products.refetch()} />
      ) : products.data.data.length === 0 ? (
        <Empty>
          <p>
            No products yet. A product is what you sell: an MCP server, an API, an app. Add one to give it
            plans.
          </p>
        </Empty>
      ) : (
        <table>
          <caption className="visually-hidden">Products</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Type</th>
              <th scope="col">Status</th>
              <th scope="col">Id</th>
            </tr>
          </thead>
          <tbody>
            {products.data.data.map((product) => (
              <tr key={product.id}>
                <td>
                  <Link to="/catalog/$productId" params={{ productId: product.id }}>
                    {product.name}
                  </Link>
                </td>
                <td>{product.productType}</td>
                <td>{product.status}</td>
                <td>
                  <code>{product.id}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {canChange && (
        <form
          className="card"
          aria-labelledby="new-product"
          onSubmit={(event) => {
            event.preventDefault();
            create.mutate();
          }}
          noValidate
        >
          <h2 id="new-product">New product</h2>
          <Field label="Name" name="name" value={name} onChange={setName} error={create.error} required />
          <Field
            label="Description"
            name="description"
            value={description}
            onChange={setDescription}
            error={create.error}
          />
          <FormProblem error={create.error} fields={['name', 'description']} />
          <button type="submit" className="primary" disabled={create.isPending}>
            Add product
          </button>
        </form>
      )}
    </Page>
  );
}

/** A product and its plans, with the plan editor (tiers previewed as invoices price them). */
export function ProductPage() {
  const { productId } = useParams({ strict: false }) as { productId: string };
  const session = useSession();
  const product = useQuery({
    queryKey: ['product', productId],
    queryFn: () => unwrap(api.GET('/v1/ui/products/{id}', { params: { path: { id: productId } } })),
  });
  const plans = useQuery({
    queryKey: ['plans', productId],
    queryFn: () =>
      unwrap(
        api.GET('/v1/ui/products/{id}/plans', { params: { path: { id: productId }, query: { limit: 100 } } }),
      ),
  });
  if (product.isPending) return <Loading what="the product" />;
  if (product.error) return <Failed error={product.error} retry={() => void product.refetch()} />;
  const canChange = session.data !== undefined && mayManage(session.data.role);
  return (
    <Page title={product.data.name}>
      <p className="muted">
        <Link to="/catalog">Catalog</Link> · <code>{product.data.id}</code>
        {product.data.description ? ` · ${product.data.description}` : ''}
      </p>
      <h2>Plans</h2>
      {plans.isPending ? (
        <Loading what="plans" />
      ) : plans.error ? (
        <Failed error={plans.error} retry={() => void plans.refetch()} />
      ) : plans.data.data.length === 0 ? (
        <Empty>
          <p>No plans yet: a plan is a price and a set of limits customers buy.</p>
        </Empty>
      ) : (
        <table>
          <caption className="visually-hidden">Plans of {product.data.name}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Type</th>
              <th scope="col">Price</th>
              <th scope="col">Pricing</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {plans.data.data.map((plan) => (
              <tr key={plan.id}>
                <td>{plan.name}</td>
                <td>{plan.type}</td>
                <td>
                  {money(plan.type === 'hybrid' ? plan.basePrice : plan.price, plan.currency)}
                  {plan.billingCycle ? ` / ${plan.billingCycle}` : ''}
                </td>
                <td>
                  {plan.tiers
                    ? `${plan.tiers.length} tiers (${plan.tiersMode})`
                    : plan.unitAmountDecimal
                      ? `${plan.unitAmountDecimal}${decimalsOf(plan.currency) === 2 ? '¢' : ` ${minorName(plan.currency)}`} per unit`
                      : '—'}
                </td>
                <td>{plan.status}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {canChange && <PlanForm productId={productId} />}
      <PromotionCodeSettings
        productId={product.data.id}
        paywall={product.data.paywallPromotionCodes}
        portal={product.data.portalPromotionCodes}
        canChange={canChange}
      />
      <RetentionOffer
        productId={product.data.id}
        coupon={product.data.retentionCoupon}
        canChange={canChange}
      />
    </Page>
  );
}

/**
 * Where a customer may type a coupon's code for this product (docs/coupons.md): on the checkout
 * its paywall opens, and on a plan change in the customer portal.
 */
function PromotionCodeSettings(props: {
  productId: string;
  paywall: boolean;
  portal: boolean;
  canChange: boolean;
}) {
  const client = useQueryClient();
  const [paywall, setPaywall] = useState(props.paywall);
  const [portal, setPortal] = useState(props.portal);
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/v1/ui/products/{id}', {
          params: { path: { id: props.productId } },
          body: { paywallPromotionCodes: paywall, portalPromotionCodes: portal },
        }),
      ),
    onSuccess: () => void client.invalidateQueries({ queryKey: ['product', props.productId] }),
  });
  return (
    <form
      className="card"
      aria-labelledby="promotion-code-settings"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="promotion-code-settings">Promotion codes</h2>
      <fieldset disabled={!props.canChange} className="choices">
        <legend className="visually-hidden">Where customers may type a code</legend>
        <Checkbox
          label="Promotion codes at the paywall"
          name="paywallPromotionCodes"
          checked={paywall}
          onChange={setPaywall}
          hint="The checkout a customer meets past a limit has a field for a coupon's code"
        />
        <Checkbox
          label="Promotion codes in the customer portal"
          name="portalPromotionCodes"
          checked={portal}
          onChange={setPortal}
          hint="A customer changing plans or buying credits in the portal may apply a code"
        />
      </fieldset>
      <FormProblem error={save.error} fields={['paywallPromotionCodes', 'portalPromotionCodes']} />
      {save.isSuccess && !save.isPending && <p role="status">Saved.</p>}
      {props.canChange && (
        <button type="submit" disabled={save.isPending}>
          Save promotion codes
        </button>
      )}
    </form>
  );
}
