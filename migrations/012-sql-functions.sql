-- The SQL functions' current definitions live in sql/ (one concept per file, CREATE OR REPLACE),
-- applied by the migration runner after the numbered migrations. The runner records here what
-- it applied, so a file runs again only when its text changed (or after a numbered migration,
-- which may have dropped or replaced what a file defines): replacing a function discards the
-- plans every session has cached for it, so it is not done at every start.
CREATE TABLE sql_function_sources (
  name text PRIMARY KEY,
  sha256 text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
