/**
 * What each API operation does beyond its one-line summary: what it answers, what it changes and
 * what it refuses, as the rendered reference (`/docs`) and generated clients show it. Keyed like
 * OPERATION_IDS; a route missing here fails the OpenAPI test. A route's own `description` wins.
 */
export const OPERATION_DESCRIPTIONS: Readonly<Record<string, string>> = {
  'GET /.well-known/oauth-authorization-server':
    'The authorization server metadata MCP clients discover after the proxy’s 401: issuer, authorization, token, registration and revocation endpoints, PKCE S256 and the scopes. Open to anyone.',
  'GET /.well-known/openid-configuration':
    'The same metadata under the OpenID discovery name, for clients that look there first. Open to anyone.',
  'POST /v1/customer/auth/register':
    'Dynamic client registration (RFC 7591) for MCP clients: public clients with PKCE, redirect URIs on loopback or https. Answers the client_id; invalid metadata gets the RFC’s error object with 400.',
  'POST /v1/customer/auth/logins':
    'The JSON form of the sign-in page: checks the email and password of an account of the MCP server’s provider and answers the redirect URL with the authorization code. Wrong credentials get 401 `invalid_credentials`; repeated failures 429 with Retry-After.',
  'POST /v1/customer/auth/signups/:verificationId/verify':
    'Checks the code mailed by a sign-up or password reset. A wrong code counts against a small number of attempts; an expired or used verification is refused. On success the account has its password and the answer carries the redirect URL with the authorization code.',
  'POST /v1/customer/auth/token':
    'Exchanges an authorization code (with its PKCE verifier and the same redirect URI and resource) for an access token and a refresh token, or a refresh token for new ones; each refresh token is used once and replaced. Errors are OAuth error objects (RFC 6749 5.2).',
  'POST /v1/customer/auth/revoke':
    'Revokes a refresh token and the sign-in it belongs to (RFC 7009): its access tokens stop being accepted by the proxy within seconds. Answers 200 whether or not the token was known.',
  'POST /v1/processors/stripe/webhooks/:providerId':
    'Where a provider points its Stripe webhook endpoint: the Stripe-Signature header is verified with the connected signing secret before anything is read, and each event is applied once (a redelivery is answered 200 and ignored). Not called by providers’ code.',
  'POST /v1/sdk/test-clocks':
    'Sandbox only: a clock frozen at `frozenTime` that customers can be attached to, so that renewals, trials, dunning and invoices can be walked through in minutes. A live key gets 404.',
  'GET /v1/sdk/test-clocks': 'Sandbox only: the provider’s test clocks.',
  'GET /v1/sdk/test-clocks/:id': 'Sandbox only: a test clock and its time.',
  'POST /v1/sdk/test-clocks/:id/advance':
    'Sandbox only: moves the clock to `frozenTime` (forward only) and runs, in order, everything that falls due for its customers on the way: renewals, trial ends, invoice closes, payment retries. A clock already advancing answers 409 `test_clock_advancing`.',
  'GET /v1/sdk/merchant':
    'The name, legal name, logo, terms and privacy URLs and support contact the hosted checkout and invoices show to customers, for the environment of the key.',
  'PATCH /v1/sdk/merchant':
    'Changes the merchant identity customers see; only the fields sent change. URLs must be http(s) and are checked as URLs. `address` is the postal address invoices give under the legal name (with the company, VAT and tax numbers); given whole, it replaces the last one, and null clears it. Invoices already issued keep what they were issued with.',
  'POST /v1/sdk/customers':
    'Creates a customer, optionally with your own `externalRef` (unique per provider and environment: 409 `customer_exists` if taken), an email, metadata, a billing `address` and up to 5 `taxIds` (`eu_vat`, `gb_vat`, `us_ein`, … in Stripe’s names; each checked for its kind’s form and stored without spaces, dots or dashes, upper case: a malformed one is 400 `validation_failed` naming it, and nothing is created). Answers the customer with its `reference` (cus_…).',
  'GET /v1/sdk/customers':
    'Customers, cursor-paginated (`limit`, `cursor`); `externalRef` or `email` find the matching ones.',
  'POST /v1/sdk/customers/ensure':
    'Idempotent create by `externalRef`: answers the existing customer (200) or creates it (201), so it can be called on every sign-in of your own users.',
  'GET /v1/sdk/customers/:ref':
    'A customer by its reference (cus_…) or your externalRef. 404 `customer_not_found` otherwise.',
  'PATCH /v1/sdk/customers/:ref':
    'Changes a customer’s email, name, telephone, externalRef, metadata, billing `address` or `taxIds`; only the fields sent change. An address given replaces the last one whole and null clears it; `taxIds` replaces the list ([] clears it). Invoices keep the details they were finalized with; drafts follow. A change of name, email or address goes on to the customer’s Stripe customer.',
  'DELETE /v1/sdk/customers/:ref':
    'Deletes a customer: it can no longer be used, its access tokens are revoked, and every purchase it has in force is cancelled at once, in the same transaction (no refund of unused time; usage up to now is billed when its period closes); its open checkout sessions expire and its auto top-up is deleted with it. Its purchases, invoices and ledger entries are kept for the books.',
  'GET /v1/sdk/customers/:ref/balance':
    'The customer’s credit balance: credits bought or granted less those spent, with calls recorded but not yet debited counted first, so the figure is what calls can still spend.',
  'POST /v1/sdk/alerts':
    'An alert on every customer of a plan (`planRef`) or on one customer (`customerRef`): `allowance_percent` fires when the calls of a purchase’s period reach `threshold` percent of its plan’s limit (1–1000; the plan needs a limit), `credit_balance` when the credit balance falls below `threshold` credits. Each crossing fires once per period (a purchase’s period; for balances, until credits are added again) as a `customer.alert_triggered` event and a mail to the customer. The same alert twice is 409 `alert_exists`.',
  'GET /v1/sdk/alerts': 'The alerts, of one plan or one customer when asked.',
  'DELETE /v1/sdk/alerts/:id':
    'Deletes an alert (with its record of what it fired). 404 `alert_not_found` otherwise.',
  'GET /v1/sdk/customer-emails':
    'Which billing mails go to the customers of the key’s environment, kind by kind: `paymentFailed` (a recurring payment failed: the amount, the day of the next try, and where to pay now or change cards; or a trial ended unpaid), `trialEnding`, `upcomingRenewal`, `receipts`, `refunds`, `autoTopUpFailed` (an automatic credit top-up refused: when it is tried again, or that it stopped) `expiringCards` (the default card expires this month and will be charged again: add a new one) and `cancellations` (a plan cancelled to end with its period: the day it ends and where to keep it; and a plan that ended, at once, with its period or after failed payments). All are off until turned on.',
  'PATCH /v1/sdk/customer-emails':
    'Turns kinds of billing mail on or off; only the kinds sent change. From then on, each event of a kind turned on (`purchase.past_due` or `purchase.suspended`, `purchase.trial_ending`, `purchase.renewal_reminder`, `payment.succeeded`, `payment.refunded`, `credits.auto_topup_failed`, `customer.card_expiring`, `purchase.cancellation_scheduled` or `purchase.cancelled`) mails its customer, if they have an email address, within a scheduler pass; a mail SMTP refuses is tried again after 1, 5, 30, 120 and 360 minutes.',
  'GET /v1/sdk/customer-emails/messages':
    'The billing mails to customers, newest first (`limit`, `cursor`), or one customer’s (`customerRef`): each with its kind, the event it is about, its status (`pending`, `sent`, `skipped` when the customer has no address or was deleted, `failed` after every attempt), the address and subject it went with, and the last error.',
  'POST /v1/sdk/portal-sessions':
    'A link to the customer portal for one of your customers, as Stripe’s billing portal sessions: send the customer to `url` (it works once, within 15 minutes) and their browser is signed in to a page of their plans, credit balance and movements, invoices with PDFs, and their auto top-up, which they can set there. `returnUrl` (http or https) is where its Back link and sign-out go. A customer of another provider or environment is 404 `customer_not_found`.',
  'GET /v1/sdk/customers/:ref/auto-top-up':
    'The customer’s auto top-up: its threshold, the packs each top-up buys, and whether it is active or stopped after failures. 404 `auto_top_up_not_found` when none is set.',
  'PUT /v1/sdk/customers/:ref/auto-top-up':
    'Sets or replaces the customer’s auto top-up (one per customer; setting it again resumes a stopped one). When calls take the credit balance below `threshold`, one off-session charge of the default card buys `packs` of the top-up pack of the customer’s plan of `productRef`, and the credits land with the payment; concurrent draws across the threshold make one top-up. Fires at once if the balance is already below. Each top-up sends `credits.auto_topup_succeeded` or `credits.auto_topup_failed`; three failures in a row stop it.',
  'DELETE /v1/sdk/customers/:ref/auto-top-up':
    'Turns the customer’s auto top-up off. 404 `auto_top_up_not_found` when none is set.',
  'GET /v1/sdk/customers/:ref/credits':
    'The customer’s credit ledger, newest first, cursor-paginated: top-ups, grants, debits, adjustments and the usage of credit-paid plans.',
  'POST /v1/sdk/customers/:ref/credits':
    'Moves credits: `top_up` (bought; needs an Idempotency-Key), `grant` (given), `debit` (spent: an `amount`, or `units` of a plan at its creditsPerUnit) or `adjustment` (signed). A debit beyond the balance is refused with 409 `insufficient_credits`.',
  'GET /v1/ui/settings': 'The provider’s settings for the environment of the key.',
  'PATCH /v1/ui/settings': 'Changes the provider’s settings; only the fields sent change.',
  'POST /v1/sdk/activate':
    'Gives a customer a plan. A free plan is active at once; a paid one is charged to the stored card (sandbox test cards) or answers `payment_required` with a hosted `checkoutUrl`. Activating another plan of the same product switches, crediting the unused time of the old one. A `coupon` (its id or code) is redeemed on the new purchase and taken off its first invoice and the later ones its duration covers (404 `coupon_not_found`, 409 `coupon_not_redeemable`, and nothing is activated); without one, a switch keeps the old purchase’s discount. A coupon sent with an activation that answers `payment_required` is checked now, shown at checkout and redeemed when paid. A switch that failed after refunding unused time is finished by sending it again (counted from its first moment); another change of that purchase within 12 hours is 409 `early_end_unfinished`. Takes an Idempotency-Key.',
  'POST /v1/sdk/activate/preview':
    'What activating the plan now would do with money, changing nothing: the new plan’s first invoice (its price, the setup fee, the old plan’s unused paid time as a negative `proration` line, any excess as `proration_refund`, and a negative `discount` line after each charge a `coupon` or the kept discount takes money off), `dueNow` and `refund`. A coupon is checked here, not redeemed. Send its `prorationDate` back with the activation within 15 minutes to be charged exactly this.',
  'POST /v1/sdk/purchases/:ref/cancel/preview':
    'What cancelling the purchase now with `prorate` would refund: the unused time of its paid period, changing nothing. Send its `prorationDate` back with the cancellation within 15 minutes to refund exactly this.',
  'GET /v1/sdk/purchases':
    'Purchases, cursor-paginated, with filters for the customer and the rest of the query parameters below.',
  'POST /v1/sdk/coupons':
    'A coupon: `percentOff` (up to two decimals) or `amountOff` with its `currency`, for `once` (the first invoice), `repeating` (invoices issued within `durationInMonths` of redemption) or `forever`; optionally a `code` customers type, `maxRedemptions`, `redeemBy`, the `productIds` it is for, `firstTimeOnly` (customers who never paid), a `minimumAmount` with its `minimumAmountCurrency` (the plan’s price for a period plus its setup fee, before discounts, must reach it), a `customerRef` (the one customer who may redeem it) and `metadata`. Its terms never change; a code already an active coupon’s is 409 `coupon_code_taken`. See docs/coupons.md.',
  'GET /v1/sdk/coupons': 'Coupons, newest first, cursor-paginated; `status` and `code` filter.',
  'GET /v1/sdk/coupons/:id':
    'One coupon, by id or by the code of an active coupon (any case), with `timesRedeemed` and whether it is `valid` now.',
  'PATCH /v1/sdk/coupons/:id':
    'Renames a coupon or replaces its metadata (only what is sent). Its terms do not change: archive it and create another to offer different ones.',
  'POST /v1/sdk/coupons/:id/archive':
    'Archives a coupon: it can no longer be redeemed and its code is free for another. Discounts already given go on as they were. Archiving twice is harmless.',
  'POST /v1/sdk/purchases/:ref/discount':
    'Redeems a coupon (`coupon`: id or code) on a purchase that still has invoices to come (pending, trialing, active, past due), replacing any discount it had. Its next invoices take it off; those issued stay as they are. 404 `coupon_not_found`, 409 `coupon_not_redeemable` or `invalid_transition`.',
  'DELETE /v1/sdk/purchases/:ref/discount':
    'Removes the purchase’s discount: its next invoices are charged in full. A purchase without one is answered as it is.',
  'GET /v1/sdk/purchases/:ref':
    'A purchase: its plan, status and current period, and a cancellation if one is scheduled.',
  'POST /v1/sdk/purchases/:ref/cancel':
    'Cancels a purchase now, or with `atPeriodEnd` at the end of the paid period (it stays active until then and can be reactivated). Cancelling now with `prorate` refunds the unused time of a paid period to the card that paid it (`refund` in the answer; preview it first). After a switch of it that failed past its refund, 409 `early_end_unfinished` until that switch is sent again (or 12 hours pass). Takes an Idempotency-Key.',
  'POST /v1/sdk/purchases/:ref/reactivate':
    'Takes back a cancellation scheduled for the period end, as if it had never been asked. A purchase already canceled gets 409 `invalid_transition`. Takes an Idempotency-Key.',
  'POST /v1/sdk/customers/:ref/payment-methods':
    'Stores a card as the customer’s default payment method. In the sandbox, test card numbers decide the outcome of later charges (docs/billing.md); in live, a Stripe payment method id. Card numbers are never stored.',
  'GET /v1/sdk/customers/:ref/payment-methods':
    'The customer’s stored payment methods (never a full card number).',
  'POST /v1/sdk/customers/:ref/payment-methods/:id/default':
    'Makes one of the customer’s stored cards the default: renewals, first payments and auto top-ups charge it from now on.',
  'DELETE /v1/sdk/customers/:ref/payment-methods/:id':
    'Removes a stored card (in live, detached from the customer at Stripe too). When it was the default, the newest other card becomes the default. The last card cannot be removed while a priced recurring plan, usage billed to the card or an auto top-up charges it: 409 `payment_method_required`.',
  'PUT /v1/ui/processors/stripe':
    'Connects the provider’s own Stripe account for live payments (live key only; a sandbox key gets 403). The key is tried on Stripe first: a key Stripe refuses is a 400 naming `/secretKey`, Stripe out of reach a 503. Keys are stored sealed and never shown again.',
  'GET /v1/ui/processors/stripe':
    'Whether Stripe is connected, with the last 4 of its key, the Stripe mode and account.',
  'DELETE /v1/ui/processors/stripe':
    'Disconnects Stripe: everything that needs it (live payments, reconciliation) answers 409 `payments_not_configured` until it is connected again; the ledger is kept.',
  'GET /v1/ui/processors/stripe/reconciliation':
    'Compares what the ledger says moved through the Stripe balance in a window (`from`, `to`) with Stripe’s balance transactions: payments, refunds, disputes and payouts matched one by one, differences listed, nothing corrected.',
  'POST /v1/sdk/checkout-sessions':
    'A hosted checkout page for one plan, a credit top-up, or (`setup: true`) a card saved as the default with nothing charged (Stripe Checkout in setup mode in live), valid for a while; send the customer to its `url`. Paying it activates the plan or adds the credits and sends the matching webhooks. For a plan or a top-up, `coupon` (id or code) applies a coupon, checked now and redeemed when paid (`amount` is the discounted first invoice, or top-up; a top-up takes a coupon once, and not one limited to products), and `allowPromotionCodes: true` gives the page a field where the customer types a code (docs/coupons.md). `billingAddressCollection: required` asks for a billing address and `taxIdCollection: {enabled: true}` lets the customer give a tax ID (`required: "if_supported"`: one who has none must); both go on the customer before the charge, so the first invoice names them (Stripe’s page collects them in live, and a business name given with a tax ID becomes the customer’s name).',
  'GET /v1/sdk/checkout-sessions/:id': 'A checkout session: what it sells, its status and when it expires.',
  'POST /v1/ui/transactions/refunds':
    'Refunds a payment in full or in part (never more than is left of it: 409 `refund_exceeds_payment`). A full refund of a purchase’s payment revokes that purchase. Takes an Idempotency-Key: a retry under the same key after a failure gets the processor’s same refund back, never a second one (409 `refund_already_made` when that refund was recorded already; 422 `idempotency_key_reused` when Stripe holds the key for another amount). 409 `processor_refused` when Stripe refuses it (the payment refunded on its dashboard), with Stripe’s `processorCode`.',
  'GET /v1/ui/transactions':
    'The ledger’s money movements, oldest first, filtered by type, customer and time; `format=csv` answers the same rows as CSV for a spreadsheet.',
  'GET /v1/ui/financials/pnl':
    'Profit and loss of a named period (`this-month`, `last-quarter`, `last-6-months`, …) in one currency, from the ledger: revenue, refunds, disputes, fees and net, with the prior period of the same length and each month.',
  'GET /v1/ui/financials/cashflow':
    'Cash flow of the provider’s processor balance over a named period: what came in, went out and was paid out, month by month.',
  'GET /v1/ui/disputes': 'Disputes, cursor-paginated, with their status and amount.',
  'GET /v1/ui/disputes/:id': 'A dispute: the payment it concerns, its amount and status.',
  'POST /v1/ui/disputes/:id/evidence':
    'Answers a dispute that needs a response with evidence; it moves to under_review. A dispute past that point gets 409.',
  'POST /v1/sdk/sandbox/disputes':
    'Sandbox only: the customer’s bank disputes a payment, as it would in live; the amount is held back and `payment.disputed` is sent.',
  'POST /v1/sdk/sandbox/disputes/:id/close':
    'Sandbox only: the bank decides the dispute, won (the amount comes back) or lost; `payment.dispute_closed` is sent.',
  'GET /v1/ui/payouts': 'Payouts of the provider’s balance, cursor-paginated.',
  'GET /v1/ui/payouts/:id': 'A payout: its amount, status and arrival.',
  'POST /v1/sdk/sandbox/payouts':
    'Sandbox only: pays out the available balance now; it arrives after the payout delay, or fails if asked to, with the matching events.',
  'POST /v1/sdk/customers/:ref/tokens':
    'Mints an access token (a JWT signed by this service, verified by the proxy against `/.well-known/jwks.json`) that the customer presents to the MCP proxy as a bearer token, optionally for one product and with its lifetime.',
  'POST /v1/sdk/customers/:ref/tokens/revoke':
    'Revokes every access token the customer holds now; the proxy refuses them within its snapshot interval. Tokens minted afterwards work.',
  'POST /v1/ui/products':
    'Creates a product (what customers buy access to), optionally with your own `reference` (409 `reference_taken` if used). Plans, meters and MCP servers hang off it.',
  'GET /v1/ui/products': 'The provider’s products in the environment of the key, cursor-paginated.',
  'GET /v1/ui/products/:id': 'A product by its id (prd_…) or reference.',
  'PATCH /v1/ui/products/:id':
    'Changes a product’s name, description, reference, metadata, `paywallPromotionCodes` (its paywall’s plan checkouts offer a promotion-code field) or `portalPromotionCodes` (plan changes and credit packs in the customer portal take a promotion code) or `retentionCoupon` (the coupon, by id or code, the portal’s cancel page offers instead of cancelling; null for none); only the fields sent change.',
  'POST /v1/ui/products/:id/archive':
    'Archives a product: no new plans or purchases (409 `product_archived`); existing purchases run on.',
  'POST /v1/ui/products/:id/plans':
    'Creates a plan of the product: recurring, one-time, usage-based (per unit, per package, graduated or volume tiers; sub-cent prices as exact decimals) or hybrid, with limits, free units, trials and setup fees. Prices are integers of the currency’s minor unit unless a decimal field says otherwise.',
  'GET /v1/ui/products/:id/plans': 'The product’s plans, with their prices and limits.',
  'GET /v1/ui/plans/:planRef': 'A plan by its id (pln_…) or reference, with its prices, limits and status.',
  'PATCH /v1/ui/plans/:planRef':
    'Changes a plan’s settings; its type and currency cannot change (make a new plan instead).',
  'POST /v1/ui/plans/:planRef/archive':
    'Archives a plan: no new purchases of it (409 `plan_archived`); existing ones run on.',
  'POST /v1/ui/meters':
    'Creates a meter: a named measure of usage events that plans can price and limits can cap.',
  'GET /v1/ui/meters': 'The provider’s meters, including the built-in requests meter.',
  'GET /v1/ui/meters/:meterRef': 'A meter by its id (mtr_…) or name, with its settings and status.',
  'POST /v1/ui/meters/:meterRef/archive':
    'Archives a meter: its history stays queryable, new records for it are refused. The requests meter cannot be archived (409 `meter_protected`).',
  'POST /v1/sdk/meter-events':
    'Records one usage event for a customer (value default 1; decimals are exact). Answered 202 once the event is durably queued; an `id` you give makes a retry count once.',
  'POST /v1/sdk/meter-events/bulk':
    'Records up to 1000 usage events in one request: all are accepted or none (a bad one names its index), each with the same rules as a single event.',
  'POST /v1/sdk/usages':
    'Records a generic usage event (an action, its units and outcome) on the product’s requests meter, and announces it with `usage.recorded`.',
  'GET /ui/meters/:meterRef/usage':
    'The total of a meter over `from`–`to` for one customer or all, optionally in UTC buckets (`granularity` hour, day, week, month). Each total comes as `total` (a JSON number: past about 15 significant digits the nearest double) and exactly as `totalDecimal`. Served from ClickHouse; 503 `usage_store_unavailable` while it is away.',
  'GET /ui/meters/:meterRef/customers':
    'A meter’s usage per customer over a range, largest first (default: the last 30 days); each total also exactly as `totalDecimal`.',
  'GET /ui/analytics/daily':
    'Records, distinct customers and meters per UTC day over a range (default: the last 30 days).',
  'GET /v1/ui/analytics/usage':
    'Calls (records), units (the meter’s values, exact decimals) and errors per calendar bucket (`grain`: hour, day, week from Monday, month) in an IANA `timeZone` (default UTC; days and hours follow its clock changes), grouped by `groupBy` (tool, customer, product, server, outcome: success, error, paywall, cancelled, input_required, task, reported; default none). The `limit` largest groups are answered (default 10), the rest summed in `other`. Every bucket of the range is present, empty ones as zeros. Read exactly from the usage records, a record sent twice counted once. A range of more than 1,000 buckets is 400 `range_too_large` with the `limit`; an unknown grain, grouping or time zone is 400 naming it.',
  'GET /v1/ui/analytics/tools':
    'Per tool (and MCP server) over a range: calls, errors (the tool’s, the origin’s or no origin), the error rate, and the origin’s latency percentiles p50, p95 and p99 in ms (nearest rank, each within 1 % of the exact value: latencies are kept in 2 % log buckets so any range merges in constant time), over the calls that reached the origin. Calls, errors and units are exact.',
  'GET /v1/ui/analytics/funnel':
    'The paywall funnel over a range (default the last 30 days): calls the paywall answered (`shown`), the checkout sessions it offered (`offered`; concurrent paywalls of one customer share a session), how many were opened (the hosted page loaded, or paid) and paid, with open and conversion rates in basis points (of sessions offered) and the time from the paywall’s first showing to payment (median and p90, nearest rank). By the form the client saw (`url_elicitation`: the 2026 era’s input_required result or an elicitation asked inside a 2025-11-25 call; `error_32042`; `text_link`: a tool result carrying the link) and era (modern, legacy), and by the product and plan sold (a credit pack has kind topup). Paywalls are read from the usage records (503 `usage_store_unavailable` while the store is away); sessions from the database. See docs/analytics.md.',
  'GET /v1/ui/analytics/revenue':
    'Per calendar month (`from`–`to`, YYYY-MM, in an IANA `timeZone`, default UTC; at most 120 months, else 400 `range_too_large`), from the ledger in one currency (default the most used): MRR at the start and end with its movements (new, expansion, contraction, churn, reactivation; end = start + new + expansion − contraction − churn + reactivation) and MRR per paying customer; active customers (a purchase in force: free plans and trials included) and paying customers (with MRR); churn rates in basis points; revenue received by kind (recurring, usage, one-time, credit packs, other) with refunds, disputes, platform fees and net, each the P&L’s figure for the same month. MRR counts paid periods of recurring fees, normalised to a month by billing cycle (weekly and custom cycles at 365.25 ÷ 12 days a month), each customer’s sum rounded once, half to even; a trial, a pending or a past-due period adds nothing, and a purchase stops counting when it ends. See docs/analytics.md.',
  'GET /v1/ui/analytics/cancellations':
    'Why customers cancelled over `[from, to)` (default the 30 days before now), optionally for one product (`productRef`): purchases whose cancellation was asked for (the API or the portal) or made by dunning in the window, counted by `cancellationDetails.requestedAt`; one reactivated since is not counted. `total`, `requested` and `paymentFailed`; `retentionSaves`, the retention offers taken in the customer portal instead of cancelling in the window; the requested ones by the feedback the customer chose (every choice and null, most first) with each share of `requested` in basis points, half to even; the newest 20 comments. Counted exactly from the purchases. See docs/analytics.md.',
  'GET /v1/sdk/invoices/upcoming':
    'What the current period of a purchase comes to so far, priced by its plan exactly as the closing invoice will be (usage so far, free units, tiers), without creating anything.',
  'GET /v1/sdk/invoices':
    'Invoices, oldest first, filtered by customer, purchase or status; each with its hosted page and PDF links for the customer.',
  'GET /v1/sdk/invoices/:id':
    'An invoice with its lines, totals and status, and both parties as it names them: the customer’s name, email, address and tax ids, and the provider’s legal name, address and numbers, as they stood when it was finalized (a draft’s follow the customer until then).',
  'POST /v1/sdk/invoices/:id/void':
    'Voids an unpaid invoice: nothing more is collected, and a purchase past due because of it is active again. A paid invoice gets 409 `invoice_not_open`.',
  'POST /v1/sdk/invoices/:id/pay':
    'Charges an open invoice now with the customer’s default card, say once a new card is stored, instead of waiting for the next dunning retry; the attempt is apart from the dunning schedule, which a failure neither uses up nor moves. Paid, a past-due purchase renews into its next period; a paid invoice is answered as it is. A declined card is 402 `card_declined` (the attempt recorded, the invoice still open); no card is 409 `payment_method_required`; a draft, void or uncollectible invoice is 409 `invoice_not_open`; an open invoice of a purchase not past due (a suspended trial’s, paid through checkout) is 409 `invoice_not_payable`.',
  'POST /v1/sdk/invoices/:id/finalize':
    'Closes a draft invoice now instead of after the lateness allowance, counting the usage recorded so far, and collects it.',
  'POST /v1/ui/mcp-servers':
    'Puts an MCP server behind the proxy: its origin `url` (checked by the SSRF guard), the product whose plans gate its tool calls, an optional default plan and an optional API key the proxy sends to the origin. Answers the `mcpProxyUrl` customers connect to.',
  'GET /v1/ui/mcp-servers': 'The provider’s MCP servers, with their proxy URLs and status.',
  'GET /v1/ui/mcp-servers/:id':
    'An MCP server by its id (mcp_…) or subdomain, with its tools and which plans may call each.',
  'PATCH /v1/ui/mcp-servers/:id':
    'Changes an MCP server: origin, product, default plan, tools and their plans, allowed browser origins, status (only active servers are proxied). The proxy picks changes up within seconds.',
  'DELETE /v1/ui/mcp-servers/:id':
    'Removes an MCP server: the proxy stops serving its URL within seconds; usage already recorded is kept.',
  'POST /v1/ui/mcp-servers/:id/tools/import':
    'Reads the origin’s tools/list into the registry, keeping the plan settings of tools already known. An origin that cannot be read gets 422 `origin_unreachable`, naming the failure but never the origin’s answer.',
  'GET /v1/ui/mcp-servers/:id/health':
    'Looks at the origin now, as an MCP client would: `initialize`, then every page of `tools/list`, through the SSRF guard with the origin’s API key, timed end to end. An origin that fails is an answer (`healthy: false` with the reason, never the origin’s body), not an error.',
  'POST /v1/sdk/limits':
    'For APIs sold outside the proxy: whether a customer may make one more call of a product under its plan (and credits), consuming and recording it by default (`consume: false` only reads). Refusals come with the reason and, when a plan is on offer, a checkout URL.',
  'GET /v1/events':
    'The events recorded for the environment, newest first, in the envelope webhooks deliver (whether or not an endpoint took them): all of them, those about one customer (`customerRef`, an id or externalRef; 404 when none), or some types (`type`, comma-separated; an unknown type is 400). Pages with `cursor`.',
  'GET /v1/events/:id': 'One event by its id, in the envelope webhooks deliver.',
  'GET /v1/sdk/webhooks/event-types':
    'The event types webhooks carry, each with its group and what it means.',
  'POST /v1/webhook_endpoints':
    'Registers an endpoint URL (https in live; checked by the SSRF guard) for all event types or the ones listed. The answer carries the whsec_ signing secret, shown only this once.',
  'GET /v1/webhook_endpoints':
    'The provider’s webhook endpoints, with their status and failure counts (never their secrets).',
  'GET /v1/webhook_endpoints/:id': 'An endpoint, its event types, status and failure count.',
  'PATCH /v1/webhook_endpoints/:id': 'Changes an endpoint’s URL, event types or description.',
  'DELETE /v1/webhook_endpoints/:id': 'Deletes an endpoint; its pending deliveries are dropped.',
  'POST /v1/webhook_endpoints/:id/disable':
    'Stops deliveries to an endpoint; they wait until it is enabled again.',
  'POST /v1/webhook_endpoints/:id/enable':
    'Resumes an endpoint (also one disabled after repeated failures): its pending deliveries go out and the failure count restarts.',
  'POST /v1/webhook_endpoints/:id/rotate-secret':
    'Makes a new signing secret (answered once); the old one keeps signing alongside it for `overlapSeconds` (default a day), so receivers can switch without losing events.',
  'POST /v1/webhook_endpoints/:id/redeliver':
    'Sends one event (`eventId`) or every event of a time range (`from`, `to`) to the endpoint again; answers 202 with how many were queued. Receivers de-duplicate by event id.',
  'GET /v1/webhook_attempts':
    'The delivery log, newest first: each attempt’s status code, latency, error, response excerpt and next attempt, by endpoint or event.',
  'POST /v1/ui/webhooks/:endpointId/test':
    'Sends a signed `payment.succeeded` test event to the endpoint now and answers the attempt, to check a receiver end to end.',
  'POST /v1/console/sessions':
    'A console member signs in with email and password: the answer is the session (who, which provider, which role, its CSRF token) and a session cookie (HttpOnly, SameSite=Strict, Secure over https). With the cookie, the API answers as it would a key, within the role: viewers read, developers change the integration (webhooks, MCP servers, meters), admins and owners everything; changes need the CSRF token in X-CSRF-Token, and MCP-Meter-Environment picks sandbox or live. Wrong credentials get 401 `invalid_credentials`; repeated failures 429 with Retry-After; an account in several providers without `providerId`, 409 `provider_required` listing them.',
  'GET /v1/console/session':
    'The session of the console cookie: its user, provider, role, CSRF token and when it ends (30 minutes idle, 12 hours at most). 401 `session_expired` once it has ended.',
  'DELETE /v1/console/session':
    'Signs this browser out: the session ends and its cookie is cleared. Needs the session’s CSRF token in X-CSRF-Token.',
  'POST /v1/console/session/sign-out-everywhere':
    'Ends every console session of the account, on every device, this one included; answers how many ended. Needs the CSRF token.',
  'PUT /v1/console/password':
    'Changes the account’s console password, proven by the current one; every other session of the account ends, this one stays. Needs the CSRF token.',
  'GET /v1/ui/audit-events':
    'The console’s audit log, newest first, cursor-paginated: every change a member made with their session (the operationId, the path, how it ended), and their sign-ins, sign-outs and password changes, with who, when and from which address. Changes made with API keys are not in it. Owners and admins read it in the console; other roles get 403 `role_forbidden`.',
  'POST /v1/console/signups':
    'Starts a sign-up to the console: mails a six-digit code to the address and answers 202 with the sign-up’s id; nothing is created yet. 5 codes per address per 15 minutes (429 with Retry-After). 403 `signup_closed` where the operator set CONSOLE_SIGNUP=closed; 503 `mail_unavailable` when the code could not be sent.',
  'POST /v1/console/signups/:id/verify':
    'Finishes a sign-up with the mailed code: a new provider named after the business (sandbox only until the operator enables live), its keys and meters, the account and its owner membership are made in one transaction, and the answer is a signed-in session with its cookie. A code works once, for 10 minutes and 5 tries (400 `invalid_verification_code` says how many are left; 400 `verification_expired` after).',
  'POST /v1/console/invitations/lookup':
    'Reads an invitation link’s secret: the team, the invited address and role, and whether that address has an account (then accepting asks for its password). 404 `invitation_not_found`; 409 `invitation_closed` once used, revoked, replaced or expired.',
  'POST /v1/console/invitations/accept':
    'Accepts an invitation: an existing account proves itself with its password (throttled as sign-in is), a new one is made with the password given (8 characters or more); the membership is added with the invited role and the answer is a signed-in session with its cookie. An invitation is accepted once.',
  'GET /v1/ui/team':
    'The team: every member with their role and when they joined, and the invitations still open, newest first.',
  'POST /v1/ui/team/invitations':
    'Mails an invitation link (valid 7 days) to join the team with a role; a new invitation to the same address replaces the open one. Owners and admins invite; only an owner (or a secret key) invites an owner. 409 `member_exists` when the address is a member already.',
  'DELETE /v1/ui/team/invitations/:id':
    'Revokes an open invitation: its link answers 409 `invitation_closed` from now on.',
  'PATCH /v1/ui/team/members/:userId':
    'Changes a member’s role. Only an owner (or a secret key) grants or takes away the owner role, and the last owner cannot step down (409 `last_owner`): changes to one team are made one at a time.',
  'DELETE /v1/ui/team/members/:userId':
    'Removes a member from the team; their console sessions at this provider end at once. The last owner cannot be removed (409 `last_owner`); only an owner removes an owner.',
  'GET /v1/ui/api-keys':
    'The secret keys of the environment named (a key’s own, or the console’s switch) that still open the API, newest first: id, name, hint (prefix and last four characters), who made it, and when a rolled key stops. Secrets are never shown again.',
  'POST /v1/ui/api-keys':
    'Creates a secret key in the environment; the answer holds its secret this once (only its hash is kept). Console members only (developers, admins, owners): a key cannot make keys, so revoking a leaked key is enough.',
  'POST /v1/ui/api-keys/:id/roll':
    'Rolls a key: a new secret now, with the same name; the old secret keeps working for `overlapSeconds` (0, the default, stops it at once; at most 7 days) so deployments can switch. A key already rolled answers 409 `key_rolled`: roll its successor. Rolled twice at once, one new key is made.',
  'DELETE /v1/ui/api-keys/:id':
    'Revokes a key: calls with it are refused from now on (on other control planes of a deployment, within 5 seconds, how long a verified key is remembered).',
};
