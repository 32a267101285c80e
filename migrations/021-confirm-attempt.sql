-- The confirm request whose claim redeemed an invoice, by an id that request drew before it wrote
-- anything (src/domain/intents/invoices/confirm-invoice.ts). When a confirm's COMMIT goes through
-- and its answer is lost, the request finds its own claim by it and answers as the confirm it is;
-- the invoice's confirm key alone would not tell it from another request that sent the same key.
-- NULL on invoices confirmed before this column, and on every other intent.
ALTER TABLE intents ADD COLUMN IF NOT EXISTS confirm_attempt_id uuid;
