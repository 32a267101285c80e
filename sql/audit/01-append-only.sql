-- The audit logs are append-only: the database itself refuses to change or remove a row of
-- intent_events (every status change of an intent) or admin_changes (every operator write),
-- whoever asks, raw SQL included. Tables: migrations/002-core.sql.

CREATE OR REPLACE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;

DROP TRIGGER IF EXISTS intent_events_append_only ON intent_events;
CREATE TRIGGER intent_events_append_only BEFORE DELETE OR UPDATE ON intent_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
DROP TRIGGER IF EXISTS admin_changes_append_only ON admin_changes;
CREATE TRIGGER admin_changes_append_only BEFORE DELETE OR UPDATE ON admin_changes
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
