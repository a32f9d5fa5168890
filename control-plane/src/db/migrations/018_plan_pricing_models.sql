-- How usage is priced on usage-based and hybrid plans, besides the whole-cent `price` per unit:
-- a decimal unit amount in cents (sub-cent prices such as 0.2), tiers (graduated or volume), or
-- packages of N units. Amounts are exact decimals, never floats.
ALTER TABLE plans
    ADD COLUMN unit_amount numeric(27, 12) CHECK (unit_amount >= 0),
    -- [{"upTo": 1000 | null, "unitAmount": "0.1", "flatAmount": 500}], amounts as decimal strings/cents.
    ADD COLUMN tiers jsonb,
    ADD COLUMN tiers_mode text CHECK (tiers_mode IN ('graduated', 'volume')),
    ADD COLUMN package_size bigint CHECK (package_size >= 1);
