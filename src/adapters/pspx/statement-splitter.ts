/**
 * Splits a PSPX statement's JSON text, fed piece by piece as it arrives, into the elements of its
 * top-level `lines` array, each handed on as its own text for the engine's JSON.parse, and the rest
 * (the header: date and balances), kept and parsed whole at the end. A general streaming JSON
 * parser tokenises every character in JavaScript and took about five times as long as the engine's
 * parser on a million-line statement, most of a reconciliation run; this only tracks strings and
 * nesting, and leaves the parsing to JSON.parse.
 *
 * Whatever is not a line goes to the header text, which is bounded, and a line's text is bounded:
 * memory stays flat whatever the provider sends. The text between lines is checked here (a comma
 * between two lines, nothing else but white space); anything else malformed fails JSON.parse of
 * the line or of the header.
 */

/** What a statement may carry besides its lines: a date and two balances take under a hundred characters. */
export const STATEMENT_HEADER_CHARS_MAX = 64 * 1024;
/** A line of the contract is well under 400 characters (a lineId of 100, a UUID, an amount, a date). */
export const STATEMENT_LINE_CHARS_MAX = 4096;

export class StatementTextError extends Error {}

enum Mode {
  /** Outside the lines array: the text goes to the header. */
  Header,
  /** Inside the lines array, before its first element. */
  First,
  /** Inside the lines array, after an element. */
  AfterLine,
  /** Inside the lines array, after a comma. */
  Next,
  /** Inside one element of the lines array. */
  Line,
}

const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
/** The header's text so far ends with the key `lines`: the array that opens now is the lines. */
const LINES_KEY_BEFORE = /"lines"\s*:\s*$/;

const isWhiteSpace = (code: number) => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
const notJson = (): never => {
  throw new StatementTextError('the statement is not valid JSON');
};

export class StatementSplitter {
  private mode = Mode.Header;
  /** Nesting in the header (the top-level object is 1), or within the current line (the line's own object is 1). */
  private depth = 0;
  private inString = false;
  private escaped = false;
  private header = '';
  private linesSeen = false;
  /** The current line's text from earlier pieces. */
  private lineParts: string[] = [];
  private lineChars = 0;
  private lineCount = 0;

  /** @param onLine receives each line's text, in order. */
  constructor(private readonly onLine: (text: string, index: number) => void) {}

  /** Feeds the next piece of text; throws StatementTextError when the statement cannot be one. */
  write(text: string): void {
    let headerFrom = this.mode === Mode.Header ? 0 : -1;
    let lineFrom = this.mode === Mode.Line ? 0 : -1;
    // Most of a statement is inside strings: they are skipped with indexOf, not character by character.
    let nextBackslash = text.indexOf('\\');
    for (let i = 0; i < text.length; i += 1) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          continue;
        }
        const quote = text.indexOf('"', i);
        if (nextBackslash !== -1 && nextBackslash < i) nextBackslash = text.indexOf('\\', i);
        if (nextBackslash !== -1 && (quote === -1 || nextBackslash < quote)) {
          i = nextBackslash;
          this.escaped = true;
        } else if (quote === -1) i = text.length;
        else {
          i = quote;
          this.inString = false;
        }
        continue;
      }
      const code = text.charCodeAt(i);
      switch (this.mode) {
        case Mode.Header:
          if (code === QUOTE) this.inString = true;
          else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
            this.depth += 1;
            if (code === OPEN_BRACKET && this.depth === 2) {
              this.addHeader(text.slice(headerFrom, i));
              headerFrom = i;
              if (LINES_KEY_BEFORE.test(this.header)) {
                // JSON.parse would keep the last of two; the lines read would be the first's.
                if (this.linesSeen) throw new StatementTextError('the statement has two lines arrays');
                this.addHeader('[');
                this.linesSeen = true;
                this.mode = Mode.First;
                headerFrom = -1;
              }
            }
          } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) this.depth -= 1;
          break;
        case Mode.First:
        case Mode.AfterLine:
        case Mode.Next:
          if (isWhiteSpace(code)) break;
          if (code === CLOSE_BRACKET && this.mode !== Mode.Next) {
            this.depth -= 1;
            this.mode = Mode.Header;
            headerFrom = i;
          } else if (code === COMMA && this.mode === Mode.AfterLine) this.mode = Mode.Next;
          else if (this.mode === Mode.AfterLine || code === COMMA || code === CLOSE_BRACKET) notJson();
          else if (code !== OPEN_BRACE) throw new StatementTextError(`line ${this.lineCount} is not an object`);
          else {
            this.mode = Mode.Line;
            this.depth = 1;
            lineFrom = i;
          }
          break;
        case Mode.Line:
          if (code === QUOTE) this.inString = true;
          else if (code === OPEN_BRACE || code === OPEN_BRACKET) this.depth += 1;
          else if ((code === CLOSE_BRACE || code === CLOSE_BRACKET) && --this.depth === 0) {
            const piece = text.slice(lineFrom, i + 1);
            this.checkLineLength(piece.length);
            const line = this.lineParts.length === 0 ? piece : this.lineParts.join('') + piece;
            this.lineParts = [];
            this.lineChars = 0;
            this.onLine(line, this.lineCount);
            this.lineCount += 1;
            this.mode = Mode.AfterLine;
            this.depth = 2;
            lineFrom = -1;
          }
          break;
      }
    }
    if (headerFrom >= 0 && this.mode === Mode.Header) this.addHeader(text.slice(headerFrom));
    if (lineFrom >= 0 && this.mode === Mode.Line) {
      const piece = text.slice(lineFrom);
      this.checkLineLength(piece.length);
      this.lineParts.push(piece);
      this.lineChars += piece.length;
    }
  }

  /** The header, parsed, once the whole text was written: `lines` in it is an empty array. */
  end(): Record<string, unknown> {
    if (this.mode !== Mode.Header || this.inString || this.depth !== 0) notJson();
    let parsed: unknown;
    try {
      parsed = JSON.parse(this.header);
    } catch {
      return notJson();
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new StatementTextError('the statement is not an object');
    const header = parsed as Record<string, unknown>;
    if (!Array.isArray(header.lines) || header.lines.length > 0) throw new StatementTextError('the statement has no lines array');
    return header;
  }

  get lines(): number {
    return this.lineCount;
  }

  private addHeader(text: string): void {
    if (this.header.length + text.length > STATEMENT_HEADER_CHARS_MAX) {
      throw new StatementTextError(`the statement carries more than ${STATEMENT_HEADER_CHARS_MAX} characters besides its lines`);
    }
    this.header += text;
  }

  private checkLineLength(more: number): void {
    if (this.lineChars + more > STATEMENT_LINE_CHARS_MAX) {
      throw new StatementTextError(`line ${this.lineCount} is longer than ${STATEMENT_LINE_CHARS_MAX} characters`);
    }
  }
}
