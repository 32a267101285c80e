-- Operations, round two: who owns a setting, and the last audit run.
-- docs/rules.md R67: who owns a setting. CONFIG_FILE seeds a service key that is absent; after
-- that the database (the admin API) owns it. The fingerprint of the file's entry as last applied is
-- kept here, so a start can tell "the file changed" (applied, logged and change-logged) from "the
-- admin API changed the key since" (kept).
CREATE TABLE config_file_applied (
  entity text NOT NULL,
  entity_id text NOT NULL,
  file_hash text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (entity, entity_id)
);

-- The last invariant audit (GET /admin/audit, `payorch audit`): its result and time, for
-- /metrics and an alert when it fails or stops running (docs/OPERATIONS.md, Monitoring).
CREATE TABLE audit_last_run (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  ok boolean NOT NULL,
  violations integer NOT NULL,
  finished_at timestamptz NOT NULL
);
