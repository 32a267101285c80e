import type { Sql } from '../../../adapters/database.js';
import type { CreateTransferError, CreateTransferResult, Ledger, TransferInput } from '../../../ledger/ledger.js';

/**
 * What one intent's ledger batch did. `reservation_refused`: nothing moved (the settlement chain
 * needs the reservation, so it failed with it). `settlement_refused`: the reservation applied, the
 * chain did not, and the reservation has been voided again, so nothing moved either.
 */
export type MoneyOutcome =
  | { readonly kind: 'applied' }
  | { readonly kind: 'reservation_refused'; readonly failure: CreateTransferResult }
  | { readonly kind: 'settlement_refused'; readonly results: readonly CreateTransferError[]; readonly reason: string };

export const SETTLEMENT_REFUSAL = 'ledger_transfer_error: ';

/**
 * The ledger's statuses of a refused settlement, read back from the intent's stored
 * failureReason; null for an intent that failed any other way.
 */
export function settlementRefusalOf(failureReason: string | null): string | null {
  return failureReason?.startsWith(SETTLEMENT_REFUSAL) ? failureReason.slice(SETTLEMENT_REFUSAL.length) : null;
}

/**
 * What the ledger's answer to `[reserve, ...settle]` means for the intent, before any void:
 * `exists` answers are retried steps, which is success.
 */
export function moneyOutcomeOf(results: readonly CreateTransferResult[]): MoneyOutcome {
  const failures = results.filter((f) => f.result !== 'exists');
  const reserveFailure = failures.find((f) => f.index === 0);
  if (reserveFailure !== undefined) return { kind: 'reservation_refused', failure: reserveFailure };
  if (failures.length === 0) return { kind: 'applied' };
  const refused = failures.map((f) => f.result);
  return { kind: 'settlement_refused', results: refused, reason: `${SETTLEMENT_REFUSAL}${refused.join(', ')}` };
}

/**
 * One ledger call for the transfers of every intent; answers the ledger's results per intent,
 * with indexes within that intent's own transfers.
 */
export async function ledgerResultsPerIntent(
  tx: Sql,
  ledger: Ledger,
  perIntent: ReadonlyArray<readonly TransferInput[]>,
): Promise<Map<number, CreateTransferResult[]>> {
  const byIntent = new Map<number, CreateTransferResult[]>();
  if (perIntent.length === 0) return byIntent;
  const owner: Array<{ intent: number; offset: number }> = [];
  perIntent.forEach((transfers, intent) => {
    for (let offset = 0; offset < transfers.length; offset += 1) owner.push({ intent, offset });
  });
  for (const failure of await ledger.createTransfers(tx, perIntent.flat())) {
    const at = owner[failure.index];
    if (at === undefined) throw new Error(`ledger named transfer ${failure.index} of ${owner.length}`);
    byIntent.set(at.intent, [...(byIntent.get(at.intent) ?? []), { index: at.offset, result: failure.result }]);
  }
  return byIntent;
}

/**
 * Voids the reservations of the chains the ledger refused in this batch. A void the ledger
 * refuses throws, which rolls the batch back, reservations included: no money is left held.
 */
export async function voidRefusedChains(tx: Sql, ledger: Ledger, voids: readonly TransferInput[]): Promise<void> {
  if (voids.length === 0) return;
  const refused = (await ledger.createTransfers(tx, voids)).filter((f) => f.result !== 'exists');
  if (refused.length > 0)
    throw new Error(`ledger refused to void: ${refused.map((f) => `${voids[f.index]?.pendingId} ${f.result}`).join(', ')}`);
}
