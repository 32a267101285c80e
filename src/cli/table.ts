/** A tiny text-table formatter for the CLI's human output (no dependency for a few columns). */

export type Align = 'left' | 'right';

export interface Column {
  readonly header: string;
  /** Numbers read best right-aligned. */
  readonly align?: Align;
}

/** Longer cells (reasons, payloads) are cut, so one value cannot push every other column off screen. */
export const CELL_WIDTH_MAX = 60;
const GAP = '  ';

const widthOf = (text: string) => [...text].length;

function clip(text: string): string {
  const flat = text.replaceAll(/\s*\n\s*/g, ' ');
  const chars = [...flat];
  return chars.length <= CELL_WIDTH_MAX ? flat : `${chars.slice(0, CELL_WIDTH_MAX - 1).join('')}…`;
}

function pad(text: string, width: number, align: Align): string {
  const fill = ' '.repeat(Math.max(0, width - widthOf(text)));
  return align === 'right' ? fill + text : text + fill;
}

/** Header, a rule, one line per row; '(none)' under the rule when there are no rows. */
export function formatTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const cells = rows.map((row) => columns.map((_, index) => clip(row[index] ?? '')));
  const widths = columns.map((column, index) => Math.max(widthOf(column.header), ...cells.map((row) => widthOf(row[index] ?? ''))));
  const line = (values: readonly string[]) =>
    columns
      .map((column, index) => pad(values[index] ?? '', widths[index] ?? 0, column.align ?? 'left'))
      .join(GAP)
      .trimEnd();
  const rule = widths.map((width) => '-'.repeat(width)).join(GAP);
  const body = cells.length === 0 ? ['(none)'] : cells.map(line);
  return `${[line(columns.map((column) => column.header)), rule, ...body].join('\n')}\n`;
}

/** One record as `field  value` lines. */
export function formatRecord(entries: readonly (readonly [string, string])[]): string {
  const width = Math.max(0, ...entries.map(([field]) => widthOf(field)));
  return `${entries.map(([field, value]) => `${pad(field, width, 'left')}${GAP}${clip(value)}`.trimEnd()).join('\n')}\n`;
}
