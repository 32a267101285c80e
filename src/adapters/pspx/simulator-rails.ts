import type { Database } from '../database.js';
import type { PspxSimulator } from './pspx-simulator.js';

/**
 * Demo only, wired where the built-in simulator stands in for PSPX (no PSPX_URL). A real
 * provider's balance also moves by rails payorch does not drive: a customer's QR top-up
 * (QP_TOPUP, nostro → user in the ledger) is money paid into the partner account, a WITHDRAWAL
 * (user → nostro) money paid out of it to the customer's bank. The simulator knew of neither, so
 * its balance stood still while the ledger's nostro moved, and the balance monitor logged
 * balance_drift after a couple of README top-ups.
 *
 * This feed plays those rails: before the simulator answers a balance request it books each such
 * intent that settled since `since`, once, by what the intent says crossed the nostro (a top-up
 * takes amount + pre-fee out of it, a withdrawal puts amount − post-fee in). It reads intents, not
 * the nostro's balance: a ledger that posted an intent wrongly still shows as drift. Intents on
 * PSPX_TRANSFER are left out: the simulator pays those itself through its payout API.
 */
export function simulatorRailsFeed(db: Database, simulator: PspxSimulator, nostroAccount: string, since: Date): () => Promise<void> {
  return async () => {
    const { rows } = await db.query<{ id: string; partner_delta: bigint }>(
      `SELECT id,
              CASE WHEN from_account_name = $1 THEN amount + pre_fee_amount ELSE -(amount - post_fee_amount) END::bigint AS partner_delta
         FROM intents
        WHERE status = 'SETTLED' AND operation_type IN ('QP_TOPUP', 'WITHDRAWAL') AND channel <> 'PSPX_TRANSFER'
          AND $1 IN (from_account_name, to_account_name) AND updated_at >= $2`,
      [nostroAccount, since.toISOString()],
    );
    for (const row of rows) simulator.bookRailsMovement(row.id, BigInt(row.partner_delta));
  };
}
