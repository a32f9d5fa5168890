import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { Field, FormProblem } from '../ui';

/**
 * The coupon the customer portal's cancel page offers a customer of this product about to cancel
 * (docs/portal.md), named by its id or code; empty takes the offer away.
 */
export function RetentionOffer(props: { productId: string; coupon: string | null; canChange: boolean }) {
  const client = useQueryClient();
  const [coupon, setCoupon] = useState(props.coupon ?? '');
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/v1/ui/products/{id}', {
          params: { path: { id: props.productId } },
          body: { retentionCoupon: coupon.trim() === '' ? null : coupon.trim() },
        }),
      ),
    onSuccess: (product) => {
      setCoupon(product.retentionCoupon ?? '');
      return client.invalidateQueries({ queryKey: ['product', props.productId] });
    },
  });
  return (
    <form
      className="card"
      aria-labelledby="retention-offer"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="retention-offer">Retention offer</h2>
      <fieldset disabled={!props.canChange}>
        <legend className="visually-hidden">The coupon offered to a customer about to cancel</legend>
        <Field
          label="Coupon offered instead of cancelling"
          name="retentionCoupon"
          value={coupon}
          onChange={setCoupon}
          error={save.error}
          hint="Its id or code; the portal's cancel page offers it to a customer without a discount. Empty: no offer"
        />
      </fieldset>
      <FormProblem error={save.error} fields={['retentionCoupon']} />
      {save.isSuccess && !save.isPending && <p role="status">Saved.</p>}
      {props.canChange && (
        <button type="submit" disabled={save.isPending}>
          Save retention offer
        </button>
      )}
    </form>
  );
}
