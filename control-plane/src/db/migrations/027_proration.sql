-- Who asked for a refund: the provider (request), or the service itself returning the unused
-- time of a paid period at a plan switch (proration). Only a requested refund that returns a
-- whole payment revokes its purchase; a proration refund's purchase has already ended.
ALTER TABLE refunds ADD COLUMN source text NOT NULL DEFAULT 'request'
    CHECK (source IN ('request', 'proration'));
