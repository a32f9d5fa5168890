-- A usage-billed purchase that ends before its period does (a plan switch, an immediate
-- cancellation) still owes the usage of that part period: the scheduler bills it once the
-- lateness allowance after `ended_at` has passed and the usage bus is settled, then clears this.
ALTER TABLE purchases ADD COLUMN final_usage_due boolean NOT NULL DEFAULT false;
CREATE INDEX purchases_final_usage_due ON purchases (ended_at) WHERE final_usage_due;
