-- A limit check's subject (the customer and its test clock, the product, the purchase, the
-- governing plan, the credits funded) is cached by each control plane (limits/subject-cache.ts).
-- Every change to what it is read from is announced on the channel `limit_subjects` by the
-- database itself, in the writing transaction (so at its commit), with the tenant as payload
-- ('provider_id:environment'; '*' for every tenant). Triggers, not the services, so no write path
-- (a service, a migration, an operator's SQL) can change a subject unannounced.
CREATE FUNCTION notify_limit_subject() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tenant text;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        tenant := '*';
    ELSIF TG_TABLE_NAME = 'credit_balances' THEN
        IF TG_OP = 'DELETE' THEN
            SELECT c.provider_id || ':' || c.environment INTO tenant FROM customers c WHERE c.id = OLD.customer_id;
        ELSE
            SELECT c.provider_id || ':' || c.environment INTO tenant FROM customers c WHERE c.id = NEW.customer_id;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        tenant := OLD.provider_id || ':' || OLD.environment;
    ELSE
        tenant := NEW.provider_id || ':' || NEW.environment;
    END IF;
    PERFORM pg_notify('limit_subjects', COALESCE(tenant, '*'));
    RETURN NULL;
END
$$;

CREATE TRIGGER customers_limit_subject AFTER INSERT OR UPDATE OR DELETE ON customers
    FOR EACH ROW EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER products_limit_subject AFTER INSERT OR UPDATE OR DELETE ON products
    FOR EACH ROW EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER purchases_limit_subject AFTER INSERT OR UPDATE OR DELETE ON purchases
    FOR EACH ROW EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER plans_limit_subject AFTER INSERT OR UPDATE OR DELETE ON plans
    FOR EACH ROW EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER test_clocks_limit_subject AFTER INSERT OR UPDATE OR DELETE ON test_clocks
    FOR EACH ROW EXECUTE FUNCTION notify_limit_subject();
-- A subject holds what was funded (balance + usage_debited): a usage debit moves credits from one
-- column to the other and leaves it as it was, so only a change of the sum is announced.
CREATE TRIGGER credit_balances_limit_subject AFTER INSERT OR DELETE ON credit_balances
    FOR EACH ROW EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER credit_balances_funded_limit_subject AFTER UPDATE ON credit_balances
    FOR EACH ROW
    WHEN (OLD.balance + OLD.usage_debited IS DISTINCT FROM NEW.balance + NEW.usage_debited)
    EXECUTE FUNCTION notify_limit_subject();

CREATE TRIGGER customers_limit_subject_truncate AFTER TRUNCATE ON customers
    FOR EACH STATEMENT EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER products_limit_subject_truncate AFTER TRUNCATE ON products
    FOR EACH STATEMENT EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER purchases_limit_subject_truncate AFTER TRUNCATE ON purchases
    FOR EACH STATEMENT EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER plans_limit_subject_truncate AFTER TRUNCATE ON plans
    FOR EACH STATEMENT EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER test_clocks_limit_subject_truncate AFTER TRUNCATE ON test_clocks
    FOR EACH STATEMENT EXECUTE FUNCTION notify_limit_subject();
CREATE TRIGGER credit_balances_limit_subject_truncate AFTER TRUNCATE ON credit_balances
    FOR EACH STATEMENT EXECUTE FUNCTION notify_limit_subject();
