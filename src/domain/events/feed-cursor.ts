/**
 * A place in the event feed (docs/EVENTS.md): `(xact, seq)`, compared as a pair. An event's own
 * place is its row's; a reader's cursor is the place after which it goes on. Rows written before
 * migration 020 have xact 0 and their old number as seq, so a cursor given then (`e{seq}`) still
 * names the same place.
 */
export interface FeedPosition {
  readonly xact: bigint;
  readonly seq: bigint;
}

/** Before every event: a reader without a cursor starts here. */
export const FEED_START: FeedPosition = { xact: 0n, seq: 0n };

export function comparePositions(a: FeedPosition, b: FeedPosition): number {
  if (a.xact !== b.xact) return a.xact < b.xact ? -1 : 1;
  return a.seq === b.seq ? 0 : a.seq < b.seq ? -1 : 1;
}

export const laterOf = (a: FeedPosition, b: FeedPosition): FeedPosition => (comparePositions(a, b) >= 0 ? a : b);

const NUMBER = '([1-9][0-9]{0,17}|0)';
/**
 * Opaque to clients, and strict (exactly the bytes `encodeFeedCursor` writes), so a cursor the
 * service did not issue is refused (docs/rules.md R45) instead of being read as some other place.
 * `e{seq}` for xact 0 (the form every cursor had before migration 020), `e{xact}.{seq}` otherwise.
 */
const CURSOR_PATTERN = new RegExp(`^e${NUMBER}(?:\\.${NUMBER})?$`);

export function encodeFeedCursor(position: FeedPosition): string {
  const text = position.xact === 0n ? `e${position.seq}` : `e${position.xact}.${position.seq}`;
  return Buffer.from(text).toString('base64url');
}

/** The place a cursor names, or null when the text is not a cursor this service issues. */
export function decodeFeedCursor(text: string): FeedPosition | null {
  const match = CURSOR_PATTERN.exec(Buffer.from(text, 'base64url').toString('latin1'));
  if (match?.[1] === undefined) return null;
  const position = match[2] === undefined ? { xact: 0n, seq: BigInt(match[1]) } : { xact: BigInt(match[1]), seq: BigInt(match[2]) };
  return encodeFeedCursor(position) === text ? position : null;
}
