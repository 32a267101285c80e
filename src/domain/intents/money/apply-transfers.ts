import type { Sql } from '../../../adapters/database.js';
import type { CreateTransferError, CreateTransferResult, Ledger, TransferInput } from '../../../ledger/ledger.js';
import { voidTransfer } from './money-path.js';

/**
 * What one intent's ledger batch did. `reservation_refused`: nothing moved (the settlement chain
 * needs the reservation, so it failed with it). `settlement_refused`: the reservation applied, the
 * chain did not, and the reservation has been voided again, so nothing moved either.
 */
export type MoneyOutcome =
  | { readonly kind: 'applied' }
  | { readonly kind: 'reservation_refused'; readonly failure: CreateTransferResult }
  | { readonly kind: 'settlement_refused'; readonly results: readonly CreateTransferError[] };

/**
 * Runs `[reserve, ...settle]` (or the reservation alone) as one ledger call inside the caller's
 * transaction: one call per transaction keeps the account locks in one order, so two payments
 * never deadlock. `exists` answers mean a retry of the same step, which is success; the void of a
 * refused chain only touches accounts this transaction already holds.
 */
export async function applyTransfers(
  ledger: Ledger,
  tx: Sql,
  intent: { readonly id: string; readonly operationType: Parameters<typeof voidTransfer>[1] },
  transfers: readonly TransferInput[],
): Promise<MoneyOutcome> {
  const outcome = moneyOutcomeOf(await ledger.createTransfers(tx, transfers));
  if (outcome.kind !== 'settlement_refused') return outcome;
  const voidFailures = (await ledger.createTransfers(tx, [voidTransfer(intent.id, intent.operationType)])).filter(
    (f) => f.result !== 'exists',
  );
  if (voidFailures.length > 0) {
    // The transaction rolls back with this throw, reservation included: no money is left held.
    throw new Error(`ledger refused to void ${intent.id}: ${voidFailures.map((f) => f.result).join(', ')}`);
  }
  return outcome;
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
  return { kind: 'settlement_refused', results: failures.map((f) => f.result) };
}
