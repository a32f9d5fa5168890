import { describe, expect, it } from 'vitest';
import { customerOf } from '../src/modules/events/outbox';

/** Which customer an event is about, whatever its object calls the field. */
describe('customerOf', () => {
  it('reads customer events by their own id, others by the customer id they name', () => {
    expect(customerOf('customer.created', { id: 'cus_1' })).toBe('cus_1');
    expect(customerOf('customer.credit.granted', { id: 'x', customerId: 'cus_2' })).toBe('cus_2');
    expect(customerOf('purchase.created', { id: 'pur_1', customer: 'cus_3' })).toBe('cus_3');
    expect(customerOf('payment.succeeded', { customer: { id: 'cus_4' } })).toBe('cus_4');
    expect(customerOf('invoice.paid', { customer_id: 'cus_5' })).toBe('cus_5');
    expect(customerOf('purchase.updated', { customerRef: 'cus_6' })).toBe('cus_6');
  });

  it('never takes an external reference or anything else for a customer id', () => {
    expect(customerOf('purchase.created', { customerRef: 'ada' })).toBeNull();
    expect(customerOf('customer.created', { id: 'ada' })).toBeNull();
    expect(customerOf('product.created', { id: 'prd_1', customer: null })).toBeNull();
    expect(customerOf('payout.paid', { customer: 42 })).toBeNull();
  });
});
