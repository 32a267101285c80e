/**
 * The simulator's daily statements (docs/PSPX.md, Statements): a PAYOUT line for every payout it
 * paid, under the Bangkok date it paid it, and the breaks a test plants through
 * `POST /_sim/statement`. A day is closed once it is over in Bangkok, or earlier when a test closes
 * it. Planted lines keep their fields exactly as given (a decimal or negative amount, a repeated
 * lineId), so a test can make the provider answer a statement outside the contract.
 */

const STATEMENT_DATE = /^[0-9]{8}$/;
/** Lines serialized per chunk of the streamed body. */
const LINES_PER_CHUNK = 1000;
const DEBIT_TYPES: ReadonlySet<unknown> = new Set(['PAYOUT', 'FEE']);

interface SimLine {
  readonly lineId: unknown;
  readonly intentId: unknown;
  readonly type: unknown;
  amount: unknown;
  readonly valueDate: unknown;
}

interface Day {
  readonly openingBalance: bigint;
  lines: SimLine[];
  closedEarly: boolean;
}

export type PlantOutcome =
  | { readonly ok: true; readonly date: string; readonly lines: number }
  | { readonly ok: false; readonly reason: string };

const field = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

/** The balance effect of a line whose amount is an integer string; anything else moves nothing. */
function effectOf(line: SimLine): bigint {
  if (typeof line.amount !== 'string' || !/^-?[0-9]{1,40}$/.test(line.amount)) return 0n;
  const amount = BigInt(line.amount);
  return DEBIT_TYPES.has(line.type) ? -amount : amount;
}

export class SimulatorStatements {
  private readonly days = new Map<string, Day>();
  private lineSequence = 0;

  constructor(private readonly initialBalance: bigint) {}

  /** A payout the provider paid on `date`: its PAYOUT line. */
  recordPayout(date: string, intentId: string, amount: bigint): void {
    this.dayOf(date).lines.push({ lineId: this.nextLineId(date), intentId, type: 'PAYOUT', amount: amount.toString(), valueDate: date });
  }

  /**
   * `{date, close?, addLine?: {type, amount, intentId?, lineId?, valueDate?}, dropIntentId?,
   * setAmount?: {intentId, amount}}`: each part optional, applied in that order.
   */
  plant(request: Record<string, unknown>): PlantOutcome {
    const { date } = request;
    if (typeof date !== 'string' || !STATEMENT_DATE.test(date)) return { ok: false, reason: 'date must be YYYYMMDD' };
    const day = this.dayOf(date);
    if (request.close === true) day.closedEarly = true;
    const addLine = field(request.addLine);
    if (addLine !== undefined) {
      day.lines.push({
        lineId: addLine.lineId ?? this.nextLineId(date),
        intentId: addLine.intentId ?? null,
        type: addLine.type ?? 'ADJUSTMENT',
        amount: addLine.amount,
        valueDate: addLine.valueDate ?? date,
      });
    }
    if (typeof request.dropIntentId === 'string') {
      const dropped = request.dropIntentId;
      day.lines = day.lines.filter((line) => line.intentId !== dropped);
    }
    const setAmount = field(request.setAmount);
    if (setAmount !== undefined) {
      for (const line of day.lines) if (line.intentId === setAmount.intentId && line.type === 'PAYOUT') line.amount = setAmount.amount;
    }
    return { ok: true, date, lines: day.lines.length };
  }

  /** The statement's body in chunks, or null while the day is open (before its end in Bangkok, unless closed early). */
  statementOf(date: string, today: string): Iterable<string> | null {
    if (!STATEMENT_DATE.test(date)) return null;
    const day = this.days.get(date);
    if (date >= today && day?.closedEarly !== true) return null;
    const openingBalance = day?.openingBalance ?? this.closingBefore(date);
    const lines = day?.lines ?? [];
    const closingBalance = lines.reduce((balance, line) => balance + effectOf(line), openingBalance);
    return serialize(date, openingBalance, closingBalance, lines);
  }

  private dayOf(date: string): Day {
    let day = this.days.get(date);
    if (day === undefined) {
      day = { openingBalance: this.closingBefore(date), lines: [], closedEarly: false };
      this.days.set(date, day);
    }
    return day;
  }

  /** The closing balance of the latest day before `date` that has a statement, else the initial balance. */
  private closingBefore(date: string): bigint {
    let latest: string | null = null;
    for (const known of this.days.keys()) if (known < date && (latest === null || known > latest)) latest = known;
    if (latest === null) return this.initialBalance;
    const day = this.days.get(latest) as Day;
    return day.lines.reduce((balance, line) => balance + effectOf(line), day.openingBalance);
  }

  private nextLineId(date: string): string {
    this.lineSequence += 1;
    return `PSPXL-${date}-${this.lineSequence}`;
  }
}

function* serialize(date: string, openingBalance: bigint, closingBalance: bigint, lines: readonly SimLine[]): Generator<string> {
  yield `{"date":${JSON.stringify(date)},"openingBalance":"${openingBalance}","closingBalance":"${closingBalance}","lines":[`;
  for (let start = 0; start < lines.length; start += LINES_PER_CHUNK) {
    const chunk = lines.slice(start, start + LINES_PER_CHUNK).map((line) => JSON.stringify(line));
    yield (start === 0 ? '' : ',') + chunk.join(',');
  }
  yield ']}';
}
