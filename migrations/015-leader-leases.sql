-- Leadership that needs no database session (DATABASE_POOL_MODE=transaction, behind PgBouncer):
-- a row per name, held by one holder until it expires; the holder renews it on every run, and
-- anyone may take it once it has lapsed.
CREATE TABLE leader_leases (
  name text PRIMARY KEY,
  holder uuid NOT NULL,
  expires_at timestamptz NOT NULL
);
