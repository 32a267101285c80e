import type { CliIo } from './cli-io.js';
import { type Column, formatRecord, formatTable } from './table.js';

const SATANG_PER_BAHT = 100n;

/** '150000', 'THB' → '1,500.00 THB': integer arithmetic, so no amount passes through a float. */
export function formatMoney(satang: string, currency = 'THB'): string {
  if (!/^-?[0-9]+$/.test(satang)) return `${satang} ${currency}`;
  const value = BigInt(satang);
  const negative = value < 0n;
  const magnitude = negative ? -value : value;
  const whole = (magnitude / SATANG_PER_BAHT).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const fraction = (magnitude % SATANG_PER_BAHT).toString().padStart(2, '0');
  return `${negative ? '-' : ''}${whole}.${fraction} ${currency}`;
}

/** A wire value as table text: '-' for null and absent, JSON for objects. */
export function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return JSON.stringify(value);
}

/** Human tables by default, the wire JSON with --json. */
export class Output {
  constructor(
    private readonly io: CliIo,
    readonly json: boolean,
  ) {}

  /** The answer as the service sent it (--json). */
  value(value: unknown): void {
    this.io.out(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** One compact JSON document per line, for streams (`intents watch --json`). */
  jsonLine(value: unknown): void {
    this.io.out(`${JSON.stringify(value)}\n`);
  }

  record(entries: readonly (readonly [string, unknown])[]): void {
    this.io.out(formatRecord(entries.map(([field, value]) => [field, cell(value)])));
  }

  table(columns: readonly Column[], rows: readonly (readonly unknown[])[]): void {
    this.io.out(
      formatTable(
        columns,
        rows.map((row) => row.map(cell)),
      ),
    );
  }

  line(text: string): void {
    this.io.out(`${text}\n`);
  }

  /** Human-readable `value` when not --json, else the JSON. */
  show(value: unknown, human: () => void): void {
    if (this.json) this.value(value);
    else human();
  }
}
