-- The customer an event is about, so a customer's events are read by index, not by scanning
-- payloads: customer.* events are about their object; others name the customer's id under one
-- of the spellings objects have used (customer, customerId, customer_id, customerRef), and only
-- a cus_ id counts. The same rule as customerOf() in events/outbox.ts, for the events so far.
ALTER TABLE outbox_events ADD COLUMN customer_id text;
UPDATE outbox_events
   SET customer_id = CASE
         WHEN type LIKE 'customer.%' AND type NOT LIKE 'customer.credit.%' THEN
           CASE WHEN payload #>> '{data,object,id}' LIKE 'cus\_%' THEN payload #>> '{data,object,id}' END
         ELSE (SELECT v FROM unnest(ARRAY[
                 payload #>> '{data,object,customer}', payload #>> '{data,object,customer,id}',
                 payload #>> '{data,object,customerId}', payload #>> '{data,object,customerId,id}',
                 payload #>> '{data,object,customer_id}', payload #>> '{data,object,customer_id,id}',
                 payload #>> '{data,object,customerRef}', payload #>> '{data,object,customerRef,id}'
               ]) WITH ORDINALITY AS c (v, n)
               WHERE v LIKE 'cus\_%' ORDER BY n LIMIT 1)
       END;
CREATE INDEX outbox_events_customer ON outbox_events (provider_id, environment, customer_id, created_at)
  WHERE customer_id IS NOT NULL;
CREATE INDEX outbox_events_listing ON outbox_events (provider_id, environment, created_at DESC, id DESC);
