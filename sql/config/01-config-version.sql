-- The configuration version (table config_version, migrations/006-hot-path.sql). Every statement
-- that changes a table the API caches bumps it, whoever runs it (the admin API, CONFIG_FILE
-- bootstrap, another instance, or an operator's raw SQL), so an instance learns of a change with
-- one cheap read per request instead of re-reading the tables (src/domain/auth/config-cache.ts).
-- Statement-level triggers: one bump per statement, not per row.

CREATE OR REPLACE FUNCTION config_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE config_version SET version = version + 1;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS service_keys_config_version ON service_keys;
CREATE TRIGGER service_keys_config_version AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON service_keys
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
DROP TRIGGER IF EXISTS routes_config_version ON routes;
CREATE TRIGGER routes_config_version AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON routes
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
DROP TRIGGER IF EXISTS fee_rules_config_version ON fee_rules;
CREATE TRIGGER fee_rules_config_version AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON fee_rules
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
DROP TRIGGER IF EXISTS limit_rules_config_version ON limit_rules;
CREATE TRIGGER limit_rules_config_version AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON limit_rules
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
DROP TRIGGER IF EXISTS auth_policies_config_version ON auth_policies;
CREATE TRIGGER auth_policies_config_version AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON auth_policies
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
