-- A purchase whose calls are paid from credits (usage-based, pre-paid plans) closes each period
-- with a statement invoice of the calls and credits it spent; like a usage-billed period it
-- waits out the lateness allowance first, so the statement counts every record of the period.
ALTER TABLE purchases ADD COLUMN pays_from_credits boolean NOT NULL DEFAULT false;
UPDATE purchases p SET pays_from_credits = true
  FROM plans pl
 WHERE pl.id = p.plan_id AND pl.type = 'usage-based' AND pl.billing_model = 'pre-paid';
