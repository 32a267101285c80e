import Type from 'typebox';
import { BREAK_KINDS, BREAKS_PAGE_SIZE_MAX, RUN_STATUSES } from '../../domain/reconciliation/run-store.js';
import { Money, NullableTimestamp, Timestamp, Uuid } from './shared.js';

export const StatementDate = Type.String({ pattern: '^[0-9]{8}$', description: 'a statement date, YYYYMMDD in Asia/Bangkok' });
const NullableMoney = Type.Union([Money, Type.Null()]);

export const ReconciliationBreak = Type.Object(
  {
    kind: Type.Enum(BREAK_KINDS),
    intentId: Type.Union([Uuid, Type.Null()]),
    lineId: Type.Union([Type.String(), Type.Null()]),
    amountHere: NullableMoney,
    amountAtProvider: NullableMoney,
  },
  { additionalProperties: false },
);

const runFields = {
  runId: Uuid,
  date: StatementDate,
  status: Type.Enum(RUN_STATUSES, { description: 'BALANCED: no break and the movements agree; BREAKS: anything else' }),
  requestedBy: Type.String({ description: "the service id, 'admin-token', or 'workers' for the daily run" }),
  startedAt: Timestamp,
  finishedAt: NullableTimestamp,
  lineCount: Type.Integer({ minimum: 0, description: 'lines of the statement' }),
  matched: Type.Integer({ minimum: 0, description: 'statement lines met by a payout of the same id and amount' }),
  breakCount: Type.Integer({ minimum: 0 }),
  resolved: Type.Integer({ minimum: 0, description: 'MANUAL_REVIEW payouts the run resolved CONFIRMED (counted in matched)' }),
  openingBalance: NullableMoney,
  closingBalance: NullableMoney,
  providerMovement: Type.Union([Money, Type.Null()], { description: 'closingBalance − openingBalance of the statement' }),
  nostroMovement: Type.Union([Money, Type.Null()], {
    description:
      "the PSPX nostro's posted ledger transfers stamped inside the Bangkok day, in the provider's sign (negative: paid out, positive: topped up)",
  }),
};

export const ReconciliationRunSummary = Type.Object(runFields, { additionalProperties: false });
export const ReconciliationRun = Type.Object(
  {
    ...runFields,
    breaks: Type.Immutable(Type.Array(ReconciliationBreak, { description: `at most ${BREAKS_PAGE_SIZE_MAX}, in the order found` })),
    nextBreaksAfter: Type.Union([Type.String({ pattern: '^[0-9]+$' }), Type.Null()], {
      description: 'pass as `after` for the next page of breaks; null on the last page',
    }),
  },
  { additionalProperties: false },
);
