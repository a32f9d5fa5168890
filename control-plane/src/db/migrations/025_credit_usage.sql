-- Credits drawn down by usage. The proxy and the SDK limit check spend a credit-paid plan's
-- creditsPerUnit per admitted call from a leased counter whose cap is every credit ever made
-- available to the customer; the calls' records carry the credits they spent. Settlement
-- debits the balance up to what ClickHouse holds, so these two running totals say how far it got.
ALTER TABLE credit_balances
    ADD COLUMN usage_debited bigint NOT NULL DEFAULT 0 CHECK (usage_debited >= 0),
    ADD COLUMN usage_calls bigint NOT NULL DEFAULT 0 CHECK (usage_calls >= 0);

-- Served usage is always debited, so a balance may end below zero, and only that way: a manual
-- debit that landed while calls it did not see were still being settled. Other movements keep
-- refusing to go below zero (in the service).
ALTER TABLE credit_balances DROP CONSTRAINT credit_balances_balance_check;
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_balance_after_check;

-- Usage debits are told apart from manual ones.
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_kind_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check
    CHECK (kind IN ('top_up', 'grant', 'debit', 'adjustment', 'usage'));

-- The pack a credit-paid plan's paywall offers when the credits run out.
ALTER TABLE plans
    ADD COLUMN topup_credits bigint CHECK (topup_credits > 0),
    ADD COLUMN topup_amount bigint CHECK (topup_amount > 0),
    ADD CONSTRAINT plans_topup_pair CHECK ((topup_credits IS NULL) = (topup_amount IS NULL));
