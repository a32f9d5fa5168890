import { type Pricing, parseDecimal, priceUsage, type Tier } from '@mcp-meter/contracts/pricing';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiProblem, amountExample, api, minorName, minorOf, money, unwrap } from '../api';
import { Field, FormProblem, Select } from '../ui';

type PlanType = 'recurring' | 'usage-based' | 'hybrid' | 'one-time';
type Model = 'per-unit' | 'package' | 'graduated' | 'volume';
type Cycle = 'weekly' | 'monthly' | 'quarterly' | 'yearly';
const PERIOD: Record<Cycle, string> = {
  weekly: 'week',
  monthly: 'month',
  quarterly: 'quarter',
  yearly: 'year',
};
interface TierRow {
  upTo: string;
  unitAmount: string;
  flatAmount: string;
}

/**
 * The pricing the form describes, as invoices read it (the same code prices both), or the
 * first problem in it. The API checks it again: this is for the preview.
 */
function pricingOf(
  model: Model,
  unitAmount: string,
  tiers: TierRow[],
  packageSize: string,
  currency: string,
): Pricing | string {
  if (model === 'per-unit' || model === 'package') {
    const parsed = parseDecimal(unitAmount);
    if ('problem' in parsed) return `${model === 'package' ? 'Package' : 'Unit'} price ${parsed.problem}`;
    if (model === 'per-unit') return { model, unitAmount: parsed.scaled };
    if (!/^[1-9]\d{0,9}$/.test(packageSize.trim()))
      return 'Units per package must be a whole number, 1 or more';
    return { model, unitAmount: parsed.scaled, packageSize: BigInt(packageSize.trim()) };
  }
  const read: Tier[] = [];
  for (const [index, row] of tiers.entries()) {
    const last = index === tiers.length - 1;
    const unit = parseDecimal(row.unitAmount);
    if ('problem' in unit) return `Tier ${index + 1}: the unit price ${unit.problem}`;
    const flat = row.flatAmount.trim() === '' ? 0 : minorOf(row.flatAmount, currency);
    if (flat === undefined)
      return `Tier ${index + 1}: the flat fee must be an amount such as ${amountExample(currency, 5)}`;
    if (!last && !/^\d{1,13}$/.test(row.upTo.trim()))
      return `Tier ${index + 1}: "up to" must be a whole number`;
    read.push({
      upTo: last ? null : BigInt(row.upTo.trim()),
      unitAmount: unit.scaled,
      flatAmount: BigInt(flat),
    });
  }
  return { model, tiers: read };
}

/** A new plan of any type; usage pricing per unit or in tiers, with the price of N units shown. */
export function PlanForm(props: { productId: string }) {
  const client = useQueryClient();
  const [name, setName] = useState('');
  const [type, setType] = useState<PlanType>('usage-based');
  const [currency, setCurrency] = useState('usd');
  const [price, setPrice] = useState('0');
  const [freeUnits, setFreeUnits] = useState('0');
  const [model, setModel] = useState<Model>('graduated');
  const [unitAmount, setUnitAmount] = useState('0.2');
  const [tiers, setTiers] = useState<TierRow[]>([
    { upTo: '1000', unitAmount: '0', flatAmount: '' },
    { upTo: '', unitAmount: '0.1', flatAmount: '' },
  ]);
  const [units, setUnits] = useState('2500');
  const [cycle, setCycle] = useState<Cycle>('monthly');
  const [packageSize, setPackageSize] = useState('1000');
  const [billing, setBilling] = useState<'post-paid' | 'pre-paid'>('post-paid');
  const [creditsPerUnit, setCreditsPerUnit] = useState('1');
  const [packCredits, setPackCredits] = useState('');
  const [packPrice, setPackPrice] = useState('');
  const [setupFee, setSetupFee] = useState('');
  const [trialDays, setTrialDays] = useState('');
  const [limit, setLimit] = useState('');
  const credits = type === 'usage-based' && billing === 'pre-paid';
  const usage = (type === 'usage-based' && !credits) || type === 'hybrid';
  const pricing = usage ? pricingOf(model, unitAmount, tiers, packageSize, currency) : undefined;
  const cents = minorOf(price, currency);
  const create = useMutation({
    mutationFn: () => {
      if (cents === undefined)
        throw new ApiProblem(
          400,
          'validation_failed',
          `The price must be an amount such as ${amountExample(currency)}`,
          [
            {
              path: type === 'hybrid' ? '/basePrice' : '/price',
              message: `must be an amount such as ${amountExample(currency)}`,
            },
          ],
        );
      const body: Record<string, unknown> = { name, type, currency };
      if (type === 'hybrid') body.basePrice = cents;
      else if (type !== 'usage-based') body.price = cents;
      if (type !== 'one-time') body.billingCycle = cycle;
      // Optional numbers: empty leaves them out; anything else goes as typed, for the API to judge.
      const whole = (text: string) => (/^\d{1,13}$/.test(text.trim()) ? Number(text.trim()) : text.trim());
      if (setupFee.trim() !== '') body.setupFee = minorOf(setupFee, currency) ?? setupFee;
      if (trialDays.trim() !== '' && type !== 'one-time') body.trialDays = whole(trialDays);
      if (limit.trim() !== '') body.limit = whole(limit);
      if (credits) {
        body.billingModel = 'pre-paid';
        body.creditsPerUnit = whole(creditsPerUnit);
        if (packCredits.trim() !== '' || packPrice.trim() !== '')
          body.topUp = { credits: whole(packCredits), amount: minorOf(packPrice, currency) ?? packPrice };
      }
      if (usage) {
        body.freeUnits = Number(freeUnits) || 0;
        if (model === 'per-unit') body.unitAmount = unitAmount.trim();
        else if (model === 'package') {
          body.unitAmount = unitAmount.trim();
          body.packageSize = whole(packageSize);
        } else {
          body.tiersMode = model;
          body.tiers = tiers.map((row, index) => ({
            upTo: index === tiers.length - 1 ? null : Number(row.upTo),
            unitAmount: row.unitAmount.trim(),
            ...(row.flatAmount.trim() === '' ? {} : { flatAmount: minorOf(row.flatAmount, currency) ?? -1 }),
          }));
        }
        if (type === 'usage-based') body.billingModel = 'post-paid';
      }
      return unwrap(
        api.POST('/v1/ui/products/{id}/plans', {
          params: { path: { id: props.productId } },
          // The form's fields are the API's, checked again there.
          body: body as never,
        }),
      );
    },
    onSuccess: () => {
      setName('');
      void client.invalidateQueries({ queryKey: ['plans', props.productId] });
    },
  });
  const setTier = (index: number, patch: Partial<TierRow>) =>
    setTiers(tiers.map((row, i) => (i === index ? { ...row, ...patch } : row)));
  let preview: React.ReactNode = null;
  if (usage && pricing !== undefined) {
    const count = /^\d{1,13}$/.test(units.trim()) ? BigInt(units.trim()) : undefined;
    const free = /^\d{1,13}$/.test(freeUnits.trim()) ? BigInt(freeUnits.trim()) : 0n;
    preview =
      typeof pricing === 'string' ? (
        <p className="field-error">{pricing}</p>
      ) : count === undefined ? (
        <p className="field-error">Units must be a whole number</p>
      ) : (
        (() => {
          const priced = priceUsage(pricing, count, free);
          return (
            <table data-testid="price-preview">
              <caption>
                {units} units cost{' '}
                <strong data-testid="preview-total">{money(priced.total, currency)}</strong>
                {free > 0n ? ` (${free} free)` : ''}
              </caption>
              <tbody>
                {priced.lines.map((line) => (
                  <tr key={line.description}>
                    <th scope="row">{line.description}</th>
                    <td>{money(line.amount, currency)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          );
        })()
      );
  }
  return (
    <form
      className="card"
      aria-labelledby="new-plan"
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate();
      }}
      noValidate
    >
      <h2 id="new-plan">New plan</h2>
      <Field label="Name" name="name" value={name} onChange={setName} error={create.error} required />
      <div className="row">
        <Select<PlanType>
          label="Type"
          name="type"
          value={type}
          onChange={setType}
          options={[
            { value: 'usage-based', label: 'Usage-based' },
            { value: 'recurring', label: 'Recurring' },
            { value: 'hybrid', label: 'Hybrid (base + usage)' },
            { value: 'one-time', label: 'One-time' },
          ]}
        />
        <Field
          label="Currency"
          name="currency"
          value={currency}
          onChange={setCurrency}
          error={create.error}
        />
        {type !== 'usage-based' && (
          <Field
            label={
              type === 'hybrid'
                ? `Base price per ${PERIOD[cycle]}`
                : type === 'one-time'
                  ? 'Price'
                  : `Price per ${PERIOD[cycle]}`
            }
            name={type === 'hybrid' ? 'basePrice' : 'price'}
            inputMode="decimal"
            value={price}
            onChange={setPrice}
            error={create.error}
          />
        )}
      </div>
      <div className="row">
        {type !== 'one-time' && (
          <Select<Cycle>
            label="Billing period"
            name="billingCycle"
            value={cycle}
            onChange={setCycle}
            options={[
              { value: 'weekly', label: 'Weekly' },
              { value: 'monthly', label: 'Monthly' },
              { value: 'quarterly', label: 'Quarterly' },
              { value: 'yearly', label: 'Yearly' },
            ]}
          />
        )}
        {type === 'usage-based' && (
          <Select<'post-paid' | 'pre-paid'>
            label="Paid"
            name="billingModel"
            value={billing}
            onChange={setBilling}
            options={[
              { value: 'post-paid', label: 'Invoiced after each period' },
              { value: 'pre-paid', label: 'From credits bought first' },
            ]}
          />
        )}
        <Field
          label="Setup fee"
          name="setupFee"
          inputMode="decimal"
          value={setupFee}
          onChange={setSetupFee}
          error={create.error}
          hint="Optional, once with the first payment"
        />
        {type !== 'one-time' && (
          <Field
            label="Trial days"
            name="trialDays"
            inputMode="numeric"
            value={trialDays}
            onChange={setTrialDays}
            error={create.error}
          />
        )}
        <Field
          label="Hard limit per period"
          name="limit"
          inputMode="numeric"
          value={limit}
          onChange={setLimit}
          error={create.error}
          hint="Optional; calls past it meet the paywall"
        />
      </div>
      {credits && (
        <fieldset>
          <legend>Credits</legend>
          <div className="row">
            <Field
              label="Credits per call"
              name="creditsPerUnit"
              inputMode="numeric"
              value={creditsPerUnit}
              onChange={setCreditsPerUnit}
              error={create.error}
            />
            <Field
              label="Top-up pack: credits"
              name="topUp/credits"
              inputMode="numeric"
              value={packCredits}
              onChange={setPackCredits}
              error={create.error}
              hint="The pack the paywall sells (optional)"
            />
            <Field
              label="Top-up pack: price"
              name="topUp/amount"
              inputMode="decimal"
              value={packPrice}
              onChange={setPackPrice}
              error={create.error}
            />
          </div>
        </fieldset>
      )}
      {usage && (
        <fieldset>
          <legend>Usage pricing</legend>
          <div className="row">
            <Field
              label="Free units per period"
              name="freeUnits"
              inputMode="numeric"
              value={freeUnits}
              onChange={setFreeUnits}
              error={create.error}
            />
            <Select<Model>
              label="Model"
              name="model"
              value={model}
              onChange={setModel}
              options={[
                { value: 'graduated', label: 'Graduated tiers' },
                { value: 'volume', label: 'Volume tiers' },
                { value: 'per-unit', label: 'Per unit' },
                { value: 'package', label: 'Per package of units' },
              ]}
            />
          </div>
          {model === 'per-unit' || model === 'package' ? (
            <div className="row">
              <Field
                label={`${minorName(currency)} per ${model === 'package' ? 'package' : 'unit'}`}
                name="unitAmount"
                inputMode="decimal"
                value={unitAmount}
                onChange={setUnitAmount}
                error={create.error}
              />
              {model === 'package' && (
                <Field
                  label="Units per package"
                  name="packageSize"
                  inputMode="numeric"
                  value={packageSize}
                  onChange={setPackageSize}
                  error={create.error}
                  hint="A started package counts whole"
                />
              )}
            </div>
          ) : (
            <table className="tiers">
              <caption>Tiers</caption>
              <thead>
                <tr>
                  <th scope="col">Up to (units)</th>
                  <th scope="col">{minorName(currency)} per unit</th>
                  <th scope="col">Flat fee</th>
                  <th scope="col">
                    <span className="visually-hidden">Remove</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {tiers.map((row, index) => {
                  const last = index === tiers.length - 1;
                  const problem = (field: string) =>
                    create.error instanceof ApiProblem
                      ? create.error.field(`tiers/${index}/${field}`)
                      : undefined;
                  return (
                    // biome-ignore lint/suspicious/noArrayIndexKey: tiers are positions, edited in place
                    <tr key={index}>
                      <td>
                        {last ? (
                          <span>and above</span>
                        ) : (
                          <input
                            aria-label={`Tier ${index + 1} up to`}
                            inputMode="numeric"
                            value={row.upTo}
                            aria-invalid={problem('upTo') !== undefined}
                            onChange={(e) => setTier(index, { upTo: e.target.value })}
                          />
                        )}
                      </td>
                      <td>
                        <input
                          aria-label={`Tier ${index + 1} ${minorName(currency).toLowerCase()} per unit`}
                          inputMode="decimal"
                          value={row.unitAmount}
                          aria-invalid={problem('unitAmount') !== undefined}
                          onChange={(e) => setTier(index, { unitAmount: e.target.value })}
                        />
                      </td>
                      <td>
                        <input
                          aria-label={`Tier ${index + 1} flat fee`}
                          inputMode="decimal"
                          value={row.flatAmount}
                          onChange={(e) => setTier(index, { flatAmount: e.target.value })}
                        />
                      </td>
                      <td>
                        {tiers.length > 1 && (
                          <button type="button" onClick={() => setTiers(tiers.filter((_, i) => i !== index))}>
                            Remove tier {index + 1}
                          </button>
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )}
          {model !== 'per-unit' && model !== 'package' && (
            <button
              type="button"
              onClick={() =>
                setTiers([
                  ...tiers.slice(0, -1),
                  { upTo: '', unitAmount: '0', flatAmount: '' },
                  ...tiers.slice(-1),
                ])
              }
            >
              Add a tier
            </button>
          )}
          <div className="preview" aria-live="polite">
            <Field
              label="Preview the price of"
              name="previewUnits"
              inputMode="numeric"
              value={units}
              onChange={setUnits}
              hint="units in one period"
            />
            {preview}
          </div>
        </fieldset>
      )}
      <FormProblem
        error={create.error}
        fields={[
          'name',
          'currency',
          'price',
          'basePrice',
          'billingCycle',
          'freeUnits',
          'unitAmount',
          'packageSize',
          'setupFee',
          'trialDays',
          'limit',
          'creditsPerUnit',
          'topUp',
        ]}
      />
      <button type="submit" className="primary" disabled={create.isPending}>
        Add plan
      </button>
    </form>
  );
}
