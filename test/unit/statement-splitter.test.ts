import { describe, expect, it } from 'vitest';
import { parseStatementLine } from '../../src/adapters/pspx/statement-reader.js';
import {
  STATEMENT_HEADER_CHARS_MAX,
  STATEMENT_LINE_CHARS_MAX,
  StatementSplitter,
  StatementTextError,
} from '../../src/adapters/pspx/statement-splitter.js';

/** Feeds `pieces` and returns the lines (parsed) and the header. */
function split(pieces: readonly string[]) {
  const lines: unknown[] = [];
  const splitter = new StatementSplitter((text, index) => {
    expect(index).toBe(lines.length);
    lines.push(JSON.parse(text));
  });
  for (const piece of pieces) splitter.write(piece);
  return { lines, header: splitter.end(), count: splitter.lines };
}

const failure = (pieces: readonly string[]) => {
  try {
    split(pieces);
  } catch (error) {
    if (error instanceof StatementTextError) return error.message;
    throw error;
  }
  return null;
};

const LINES = [
  { lineId: 'L1', intentId: null, type: 'FEE', amount: '35', valueDate: '20250110' },
  // Strings holding every character the splitter watches for: quotes, escapes, braces, brackets, commas.
  { lineId: 'a"b\\c}{][,', intentId: null, type: 'ADJUSTMENT', amount: '1', valueDate: '20250110', extra: { nested: [1, { x: '}' }] } },
  { lineId: 'ไทย ✓', intentId: null, type: 'PAYOUT', amount: '9223372036854775807', valueDate: '20250110' },
];
const DOCUMENT = JSON.stringify({ date: '20250110', openingBalance: '0', lines: LINES, closingBalance: '-36' }, null, 1);

describe('StatementSplitter', () => {
  it('hands on each line whole and keeps the header, however the text is cut into pieces', () => {
    for (let cut = 0; cut <= DOCUMENT.length; cut += 1) {
      for (const size of [1, 7]) {
        const pieces = [DOCUMENT.slice(0, cut)];
        for (let at = cut; at < DOCUMENT.length; at += size) pieces.push(DOCUMENT.slice(at, at + size));
        const { lines, header, count } = split(pieces);
        expect(lines).toEqual(LINES);
        expect(count).toBe(3);
        expect(header).toEqual({ date: '20250110', openingBalance: '0', lines: [], closingBalance: '-36' });
      }
    }
  });

  it('reads an empty day, and a lines array nested deeper as part of the header', () => {
    expect(split(['{"date":"20250110","lines":[ ],"x":{"lines":[1]}}'])).toEqual({
      lines: [],
      count: 0,
      header: { date: '20250110', lines: [], x: { lines: [1] } },
    });
  });

  it.each([
    ['a truncated statement', '{"date":"20250110","lines":[{"lineId":"L1"}', 'the statement is not valid JSON'],
    ['a truncated line', '{"date":"20250110","lines":[{"lineId":"L1', 'the statement is not valid JSON'],
    ['two lines without a comma', '{"lines":[{"a":1} {"a":2}]}', 'the statement is not valid JSON'],
    ['a leading comma', '{"lines":[,{"a":1}]}', 'the statement is not valid JSON'],
    ['a trailing comma', '{"lines":[{"a":1},]}', 'the statement is not valid JSON'],
    ['a line that is not an object', '{"lines":[{"a":1},"L2"]}', 'line 1 is not an object'],
    ['a line that is not JSON inside', '{"lines":[{"a" 1}]}', null],
    ['garbage after the statement', '{"lines":[]} x', 'the statement is not valid JSON'],
    ['an array for a statement', '[{"lines":[]}]', 'the statement is not an object'],
    ['no lines at all', '{"date":"20250110"}', 'the statement has no lines array'],
    ['lines that are not an array', '{"lines":{"a":1}}', 'the statement has no lines array'],
    ['lines named with an escape', '{"\\u006cines":[{"a":1}]}', 'the statement has no lines array'],
    ['two lines arrays', '{"lines":[{"a":1}],"lines":[]}', 'the statement has two lines arrays'],
  ])('refuses %s', (_what, text, reason) => {
    if (reason === null) {
      // The splitter hands the line on; JSON.parse refuses it (the reader reports it as not valid JSON).
      expect(() => split([text])).toThrow(SyntaxError);
    } else {
      expect(failure([text])).toBe(reason);
    }
  });

  it('bounds what it keeps: a line longer than the limit, or a header that grows past its own', () => {
    const longLine = `{"lines":[{"lineId":"${'x'.repeat(STATEMENT_LINE_CHARS_MAX)}"}]}`;
    // Sent in small pieces: the limit holds before the line is whole.
    const pieces = longLine.match(/.{1,100}/gs) ?? [];
    expect(failure(pieces)).toBe(`line 0 is longer than ${STATEMENT_LINE_CHARS_MAX} characters`);
    const bigHeader = `{"padding":"${'x'.repeat(STATEMENT_HEADER_CHARS_MAX)}","lines":[]}`;
    expect(failure(bigHeader.match(/.{1,100}/gs) ?? [])).toBe(
      `the statement carries more than ${STATEMENT_HEADER_CHARS_MAX} characters besides its lines`,
    );
  });
});

describe('parseStatementLine', () => {
  it.each(['L\t1', 'L\n1', 'L\u00001', 'L\u007f'])('refuses a lineId with a control character (%j)', (lineId) => {
    expect(() => parseStatementLine({ lineId, intentId: null, type: 'FEE', amount: '1', valueDate: '20250110' }, 0)).toThrow(
      /control character/,
    );
  });
});
