-- Alerts on an amount of spend (issue 64): `spend_amount` fires once per purchase period when the
-- period's spend (its price, paid in advance, plus the usage so far, priced as the upcoming
-- invoice prices it) reaches `threshold` minor units of the purchase's currency.
ALTER TABLE usage_alerts DROP CONSTRAINT usage_alerts_kind_check;
ALTER TABLE usage_alerts ADD CONSTRAINT usage_alerts_kind_check
    CHECK (kind IN ('allowance_percent', 'credit_balance', 'spend_amount'));
